package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

const keyColumns = `id, name, role, hash, created_ns, revoked_ns, rate_limits`

func scanKey(row interface{ Scan(...any) error }) (Key, error) {
	var k Key
	var created, revoked int64
	if err := row.Scan(&k.ID, &k.Name, &k.Role, &k.Hash, &created, &revoked, &k.RateLimits); err != nil {
		return Key{}, err
	}
	k.CreatedAt, k.RevokedAt = fromNS(created), fromNS(revoked)
	return k, nil
}

// CreateKey inserts a new key.
func (s *SQLite) CreateKey(ctx context.Context, k Key) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO keys(`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Name, k.Role, k.Hash, toNS(k.CreatedAt), toNS(k.RevokedAt), k.RateLimits)
	if isUnique(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	return nil
}

// PutKey inserts or replaces the key with k.ID.
func (s *SQLite) PutKey(ctx context.Context, k Key) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO keys(`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET name=excluded.name, role=excluded.role, hash=excluded.hash, revoked_ns=excluded.revoked_ns, rate_limits=excluded.rate_limits`,
		k.ID, k.Name, k.Role, k.Hash, toNS(k.CreatedAt), toNS(k.RevokedAt), k.RateLimits)
	if isUnique(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("put key: %w", err)
	}
	return nil
}

// keyByHashQuery is KeyByHash's statement, prepared once per store.
const keyByHashQuery = `SELECT ` + keyColumns + ` FROM keys WHERE hash = ?`

// KeyByHash looks a key up by its SHA-256.
func (s *SQLite) KeyByHash(ctx context.Context, hash []byte) (Key, error) {
	k, err := scanKey(s.keyByHashStmt.QueryRowContext(ctx, hash))
	if err != nil {
		return Key{}, notFound(err)
	}
	return k, nil
}

// KeyByID looks a key up by id.
func (s *SQLite) KeyByID(ctx context.Context, id string) (Key, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ?`, id))
	if err != nil {
		return Key{}, notFound(err)
	}
	return k, nil
}

// maxKeys caps ListKeys; a deployment with more keys needs paging first.
const maxKeys = 10000

// ListKeys returns keys oldest first.
func (s *SQLite) ListKeys(ctx context.Context) ([]Key, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+keyColumns+` FROM keys ORDER BY created_ns, id LIMIT ?`, maxKeys)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer func() { _ = rows.Close() }()
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
func (s *SQLite) RevokeKey(ctx context.Context, id string, at time.Time) (Key, error) {
	var k Key
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE keys SET revoked_ns = ? WHERE id = ? AND revoked_ns = 0`, toNS(at), id); err != nil {
			return err
		}
		var err error
		k, err = scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ?`, id))
		return notFound(err)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Key{}, err
		}
		return Key{}, fmt.Errorf("revoke key: %w", err)
	}
	return k, nil
}
