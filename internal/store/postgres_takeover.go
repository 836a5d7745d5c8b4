package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A hibernated sandbox keeps nothing on its node: its image is parked in
// the snapshot store, which the nodes of a cluster may share. When its node
// dies, another node takes its record over (TakeOverSandbox) and resumes it
// there. The move is one conditional UPDATE: it happens only while the old
// node is still dead and the record is still the one the new node decided
// on, so two nodes never both take a sandbox, and a node that comes back
// finds the record gone from its list.

// SandboxOn returns sandbox id's record and the node that holds it;
// ErrNotFound if no node does.
func (s *Postgres) SandboxOn(ctx context.Context, id string) (SandboxRow, string, error) {
	r := SandboxRow{ID: id}
	var node string
	err := s.pool.QueryRow(ctx, `SELECT owner, record, node FROM sandboxes WHERE id = $1`, id).Scan(&r.Owner, &r.Record, &node)
	if errors.Is(err, pgx.ErrNoRows) {
		return SandboxRow{}, "", ErrNotFound
	}
	if err != nil {
		return SandboxRow{}, "", fmt.Errorf("sandbox record: %w", err)
	}
	return r, node, nil
}

// TakeOverSandbox moves sandbox id's record from node from to this node,
// written as updated, if the record still reads old and from has not
// beaten within deadAfter. ErrConflict if any of that no longer holds.
func (s *Postgres) TakeOverSandbox(ctx context.Context, id, from string, deadAfter time.Duration, old, updated SandboxRow) error {
	if s.node == "" || from == s.node || old.ID != id || updated.ID != id || updated.Owner != old.Owner {
		return fmt.Errorf("take over sandbox %s: %w: not another node's record", id, ErrConflict)
	}
	if bytes.Equal(old.Record, updated.Record) {
		return fmt.Errorf("take over sandbox %s: the record must change (its slot)", id)
	}
	now := time.Now()
	tag, err := s.pool.Exec(ctx, `UPDATE sandboxes SET node = $1, record = $2, updated_ns = $3
		WHERE id = $4 AND node = $5 AND record = $6
		AND NOT EXISTS (SELECT 1 FROM nodes WHERE name = $5 AND heartbeat_ns > $7)`,
		s.node, updated.Record, now.UnixNano(), id, from, old.Record, now.Add(-deadAfter).UnixNano())
	if err != nil {
		return fmt.Errorf("take over sandbox %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("take over sandbox %s: %w: moved, changed, or its node is alive", id, ErrConflict)
	}
	return nil
}
