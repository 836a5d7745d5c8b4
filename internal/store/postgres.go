package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sandhold/sandhold/internal/redact"
)

// Postgres is the shared Store of a multi-node deployment
// (SANDBOX_DATABASE_URL=postgres://…). Every node opens the same database;
// the schema is pgMigrations, applied under an advisory lock.
//
// What it adds over SQLite is that nothing lives beside it on one host: the
// audit chain's head is the audit_head row (AuditHead), and appends from all
// nodes are serialised by locking that row.
type Postgres struct {
	pool *pgxpool.Pool
	// node names this node's sandbox records (PutSandbox, ListSandboxes).
	node string
	// dataDir is the node's data dir, locked by HoldNode (WithDataDir).
	dataDir string
}

// PostgresOption configures OpenPostgres.
type PostgresOption func(*Postgres)

// WithNode names the node this handle belongs to: its sandbox records carry
// the name and ListSandboxes returns only them, so a node never adopts (or
// reaps) another node's sandboxes.
func WithNode(name string) PostgresOption { return func(s *Postgres) { s.node = name } }

var _ Store = (*Postgres)(nil)

// IsPostgresURL reports whether a SANDBOX_DATABASE_URL value names
// PostgreSQL (the only non-default back end).
func IsPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// OpenPostgres connects to the database at url (a postgres:// URL or a
// libpq key=value string) and applies pending migrations. Errors never carry
// the URL's password.
func OpenPostgres(ctx context.Context, url string, opts ...PostgresOption) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn already masks the password; redact again in case a
		// future version does not.
		return nil, fmt.Errorf("open store: %s", redact.String(err.Error()))
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "sandhold"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %s", redact.String(err.Error()))
	}
	s := &Postgres{pool: pool}
	for _, o := range opts {
		o(s)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, errors.New(redact.String(err.Error()))
	}
	return s, nil
}

// Pool exposes the connection pool to the cluster layer (node registry,
// change notifications), which shares the database.
func (s *Postgres) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Postgres) Close() error {
	s.pool.Close()
	return nil
}

// pgUniqueViolation is SQLSTATE unique_violation.
const pgUniqueViolation = "23505"

func pgIsUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgUniqueViolation
}

func pgNotFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// CreateKey inserts a new key.
func (s *Postgres) CreateKey(ctx context.Context, k Key) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO keys(`+keyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		k.ID, k.Name, k.Role, k.Hash, toNS(k.CreatedAt), toNS(k.RevokedAt), k.RateLimits)
	if pgIsUnique(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	return nil
}

// PutKey inserts or replaces the key with k.ID.
func (s *Postgres) PutKey(ctx context.Context, k Key) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO keys(`+keyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT(id) DO UPDATE SET name=excluded.name, role=excluded.role, hash=excluded.hash, revoked_ns=excluded.revoked_ns, rate_limits=excluded.rate_limits`,
		k.ID, k.Name, k.Role, k.Hash, toNS(k.CreatedAt), toNS(k.RevokedAt), k.RateLimits)
	if pgIsUnique(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("put key: %w", err)
	}
	return nil
}

// KeyByHash looks a key up by its SHA-256.
func (s *Postgres) KeyByHash(ctx context.Context, hash []byte) (Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM keys WHERE hash = $1`, hash))
	if err != nil {
		return Key{}, pgNotFound(err)
	}
	return k, nil
}

// KeyByID looks a key up by id.
func (s *Postgres) KeyByID(ctx context.Context, id string) (Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = $1`, id))
	if err != nil {
		return Key{}, pgNotFound(err)
	}
	return k, nil
}

// ListKeys returns keys oldest first.
func (s *Postgres) ListKeys(ctx context.Context) ([]Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM keys ORDER BY created_ns, id LIMIT $1`, maxKeys)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeKey marks a key revoked.
func (s *Postgres) RevokeKey(ctx context.Context, id string, at time.Time) (Key, error) {
	var k Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE keys SET revoked_ns = $1 WHERE id = $2 AND revoked_ns = 0`, toNS(at), id); err != nil {
			return err
		}
		var err error
		k, err = scanKey(tx.QueryRow(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = $1`, id))
		if err != nil {
			return pgNotFound(err)
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify('`+ChannelKeys+`', $1)`, id)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Key{}, err
		}
		return Key{}, fmt.Errorf("revoke key: %w", err)
	}
	return k, nil
}

// GetSetting returns the value stored under key.
func (s *Postgres) GetSetting(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	if err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE key = $1`, key).Scan(&v); err != nil {
		return nil, pgNotFound(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// PutSetting stores value under key.
func (s *Postgres) PutSetting(ctx context.Context, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	// One statement writes and announces the change (delivered to the
	// other nodes when it commits; see WatchChanges).
	_, err := s.pool.Exec(ctx, `WITH up AS (
		INSERT INTO settings(key, value, updated_ns) VALUES ($1, $2, $3)
		ON CONFLICT(key) DO UPDATE SET value=excluded.value, updated_ns=excluded.updated_ns
		RETURNING key)
		SELECT pg_notify('`+ChannelSettings+`', key) FROM up`,
		key, value, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("put setting: %w", err)
	}
	return nil
}

// PutSandbox inserts or replaces a sandbox record.
func (s *Postgres) PutSandbox(ctx context.Context, r SandboxRow) error {
	// A record another node owns is never taken over (ids are random; a
	// clash is refused rather than moving the sandbox).
	tag, err := s.pool.Exec(ctx, `INSERT INTO sandboxes(id, owner, record, updated_ns, node) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT(id) DO UPDATE SET owner=excluded.owner, record=excluded.record, updated_ns=excluded.updated_ns
		WHERE sandboxes.node = excluded.node`,
		r.ID, r.Owner, r.Record, time.Now().UnixNano(), s.node)
	if err == nil && tag.RowsAffected() == 0 {
		return fmt.Errorf("put sandbox %s: %w: another node's record", r.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("put sandbox: %w", err)
	}
	return nil
}

// DeleteSandbox removes a sandbox record; a missing one is not an error.
func (s *Postgres) DeleteSandbox(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sandboxes WHERE id = $1 AND node = $2`, id, s.node); err != nil {
		return fmt.Errorf("delete sandbox: %w", err)
	}
	return nil
}

// ListSandboxes returns this node's sandbox records (WithNode).
func (s *Postgres) ListSandboxes(ctx context.Context) ([]SandboxRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, owner, record FROM sandboxes WHERE node = $1 ORDER BY id`, s.node)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	var out []SandboxRow
	for rows.Next() {
		var r SandboxRow
		if err := rows.Scan(&r.ID, &r.Owner, &r.Record); err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
