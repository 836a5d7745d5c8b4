package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ApprovalRow is one shared approval as stored: its id and the approvals
// package's JSON document (the store does not read it).
type ApprovalRow struct {
	ID  string
	Doc []byte
}

// approvalsLockKey serialises approval updates across nodes
// ("approvals" in ASCII, truncated to an int64).
const approvalsLockKey int64 = 0x617070726f76616c

// UpdateApprovals runs fn on every stored approval with the approvals of
// all nodes locked (a transaction-scoped advisory lock), then stores the
// rows fn returns in put and removes the ids in del, in the same
// transaction. An error from fn rolls everything back. This is what makes
// an approval single use across nodes: two nodes cannot both see it
// granted and both mark it used.
func (s *Postgres) UpdateApprovals(ctx context.Context, fn func(rows []ApprovalRow) (put []ApprovalRow, del []string, err error)) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, approvalsLockKey); err != nil {
			return fmt.Errorf("approvals: lock: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT id, doc FROM approvals ORDER BY id`)
		if err != nil {
			return fmt.Errorf("approvals: read: %w", err)
		}
		all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ApprovalRow, error) {
			var a ApprovalRow
			err := r.Scan(&a.ID, &a.Doc)
			return a, err
		})
		if err != nil {
			return fmt.Errorf("approvals: read: %w", err)
		}
		put, del, err := fn(all)
		if err != nil {
			return err
		}
		for _, id := range del {
			if _, err := tx.Exec(ctx, `DELETE FROM approvals WHERE id = $1`, id); err != nil {
				return fmt.Errorf("approvals: delete: %w", err)
			}
		}
		for _, a := range put {
			if _, err := tx.Exec(ctx, `INSERT INTO approvals(id, doc) VALUES ($1, $2)
				ON CONFLICT(id) DO UPDATE SET doc = excluded.doc`, a.ID, a.Doc); err != nil {
				return fmt.Errorf("approvals: write: %w", err)
			}
		}
		return nil
	})
}
