package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SandboxRow is a sandbox's record as stored: the owner for queries, the
// rest as the sandbox manager's own JSON document.
type SandboxRow struct {
	ID     string
	Owner  string
	Record []byte
}

// PutSandbox inserts or replaces a sandbox record.
// Inside a call's flush window (see FlushWindow) its flush is left to the
// call's audit commit.
func (s *SQLite) PutSandbox(ctx context.Context, r SandboxRow) error {
	now := time.Now().UnixNano()
	deferred, err := s.deferredFlush(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, putSandboxQuery, r.ID, r.Owner, r.Record, now)
		return err
	})
	if !deferred {
		_, err = s.db.ExecContext(ctx, putSandboxQuery, r.ID, r.Owner, r.Record, now)
	}
	if err != nil {
		return fmt.Errorf("put sandbox: %w", err)
	}
	return nil
}

const putSandboxQuery = `INSERT INTO sandboxes(id, owner, record, updated_ns) VALUES (?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET owner=excluded.owner, record=excluded.record, updated_ns=excluded.updated_ns`

// DeleteSandbox removes a sandbox record; a missing one is not an error.
// It always syncs itself, also inside a flush window: the manager removes
// the workspace right after it, and a record must never outlive its
// workspace on disk.
func (s *SQLite) DeleteSandbox(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete sandbox: %w", err)
	}
	return nil
}

// ListSandboxes returns every sandbox record.
func (s *SQLite) ListSandboxes(ctx context.Context) ([]SandboxRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, owner, record FROM sandboxes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	defer func() { _ = rows.Close() }()
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
