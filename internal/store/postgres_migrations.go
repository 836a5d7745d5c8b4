package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgMigrations is the PostgreSQL form of migrations: the same versions and
// names in the same order (TestPostgresMigrationsMatchSQLite holds them
// together), in PostgreSQL's dialect. Append only.
//
// Step 2 also creates audit_head, the chain head that the SQLite back end
// keeps in <datadir>/audit.head: with several nodes there is no one data dir,
// so the head is a row next to the records, moved inside the append
// transaction (see AppendAudit).
var pgMigrations = []migration{
	{1, "keys", `
CREATE TABLE keys (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	role       TEXT NOT NULL,
	hash       BYTEA NOT NULL UNIQUE,
	created_ns BIGINT NOT NULL,
	revoked_ns BIGINT NOT NULL DEFAULT 0
);`},
	{2, "audit", `
CREATE TABLE audit (
	seq         BIGINT PRIMARY KEY,
	time_ns     BIGINT NOT NULL,
	actor       TEXT NOT NULL,
	role        TEXT NOT NULL,
	client_addr TEXT NOT NULL,
	action      TEXT NOT NULL,
	target      TEXT NOT NULL,
	sandbox     TEXT NOT NULL,
	verdict     TEXT NOT NULL,
	detail      BYTEA NOT NULL,
	prev_hash   TEXT NOT NULL,
	hash        TEXT NOT NULL
);
CREATE INDEX audit_time ON audit(time_ns);
CREATE INDEX audit_actor ON audit(actor, seq);
CREATE INDEX audit_action ON audit(action text_pattern_ops, seq);
CREATE INDEX audit_sandbox ON audit(sandbox, seq);
CREATE TABLE audit_head (
	id   SMALLINT PRIMARY KEY CHECK (id = 1),
	seq  BIGINT NOT NULL,
	hash TEXT NOT NULL
);
INSERT INTO audit_head(id, seq, hash) VALUES (1, 0, '');`},
	{3, "settings", `
CREATE TABLE settings (
	key        TEXT PRIMARY KEY,
	value      BYTEA NOT NULL,
	updated_ns BIGINT NOT NULL
);`},
	{4, "sandboxes", `
CREATE TABLE sandboxes (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	record     BYTEA NOT NULL,
	updated_ns BIGINT NOT NULL
);
CREATE INDEX sandboxes_owner ON sandboxes(owner);`},
	{5, "sandbox_node", `
ALTER TABLE sandboxes ADD COLUMN node TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_node ON sandboxes(node);`},
	// The nodes of a cluster (PostgreSQL): each registers its address and
	// a heartbeat; SQLite keeps the empty table so both histories match.
	{6, "nodes", `
CREATE TABLE nodes (
	name         TEXT PRIMARY KEY,
	address      TEXT NOT NULL,
	started_ns   BIGINT NOT NULL,
	heartbeat_ns BIGINT NOT NULL,
	draining     BOOLEAN NOT NULL DEFAULT FALSE
);`},
	{7, "capacity_approvals", `
ALTER TABLE nodes ADD COLUMN capacity INTEGER NOT NULL DEFAULT 0;
CREATE TABLE approvals (
	id  TEXT PRIMARY KEY,
	doc BYTEA NOT NULL
);`},
	{8, "tickets", `
CREATE TABLE tickets (
	hash       BYTEA PRIMARY KEY,
	key_id     TEXT NOT NULL,
	expires_ns BIGINT NOT NULL
);
CREATE INDEX tickets_key ON tickets(key_id);`},
	{9, "key_rate_limits", `
ALTER TABLE keys ADD COLUMN rate_limits TEXT NOT NULL DEFAULT '';`},
	// SQLite's step 10 drops two audit indexes its planner never used.
	// PostgreSQL keeps both: its audit_action (text_pattern_ops) serves
	// the action filter's LIKE prefix and its planner may use audit_time
	// for a since filter, and neither was measured here. The step exists
	// so the two histories keep the same versions.
	{10, "audit_unused_indexes", `SELECT 1;`},
	// SQLite's step 11 adds audit_marks, a seq bound for since filters;
	// PostgreSQL has its audit_time index for them. The same versions.
	{11, "audit_marks", `SELECT 1;`},
	// Step 2 made audit_head; here it gets the guard: deleting the row,
	// truncating the table or moving the head back fails. The table and
	// the function belong to the role that ran the migration; handed to
	// another role (PostgresAnchorGuard) they are out of sandhold's reach.
	{12, "audit_head_anchor", pgAuditHeadGuard},
	// The lease by which a node holds its name (lease.go): one live
	// server per name, judged by the database's clock.
	{13, "node_leases", nodeLeasesTable},
}

// migrateLockKey is the session advisory lock that serialises migrations
// across nodes starting together ("sandhold" in ASCII, as an int64).
const migrateLockKey int64 = 0x73616e64686f6c64

func (s *Postgres) migrate(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	// A session lock on this one connection: nodes that start together wait
	// here, and the second one finds the schema already current.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	defer func() {
		// An unlock failure leaves the lock to end with the session; the
		// pool's connection is dropped so that happens now.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_ns BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	latest := 0
	for i, m := range pgMigrations {
		if m.version != i+1 {
			return fmt.Errorf("migrate: migration %q has version %d, want %d", m.name, m.version, i+1)
		}
		latest = m.version
	}
	if current > latest {
		return fmt.Errorf("migrate: database schema version %d is newer than this binary's %d; refusing to downgrade", current, latest)
	}
	for _, m := range pgMigrations[current:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.up); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations(version, name, applied_ns) VALUES ($1, $2, $3)`,
				m.version, m.name, time.Now().UnixNano())
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: step %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

// SchemaVersion returns the highest applied migration.
func (s *Postgres) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}
