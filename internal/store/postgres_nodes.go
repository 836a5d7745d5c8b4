package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Node is one registered node of a cluster.
type Node struct {
	Name      string
	Address   string // host:port its peers forward to
	Started   time.Time
	Heartbeat time.Time
	Draining  bool
	Sandboxes int // sandbox records it owns
	// Capacity is how many sandboxes the node takes (0: no limit of its
	// own); placement skips a node at capacity.
	Capacity int
}

// Full reports whether the node runs as many sandboxes as it takes.
func (n Node) Full() bool { return n.Capacity > 0 && n.Sandboxes >= n.Capacity }

// Beat is what a node's heartbeat says about it.
type Beat struct {
	Address  string // host:port its peers forward to
	Started  time.Time
	Draining bool
	Capacity int
}

// Alive reports whether the node's last heartbeat is within deadAfter.
func (n Node) Alive(now time.Time, deadAfter time.Duration) bool {
	return now.Sub(n.Heartbeat) <= deadAfter
}

// NodeName is the name this handle writes into sandbox records (WithNode).
func (s *Postgres) NodeName() string { return s.node }

// Heartbeat registers this node (WithNode) as b says, or refreshes its
// heartbeat, draining flag and capacity.
func (s *Postgres) Heartbeat(ctx context.Context, b Beat) error {
	if s.node == "" {
		return errors.New("heartbeat: this store handle has no node name")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO nodes(name, address, started_ns, heartbeat_ns, draining, capacity) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT(name) DO UPDATE SET address=excluded.address, started_ns=excluded.started_ns,
			heartbeat_ns=excluded.heartbeat_ns, draining=excluded.draining, capacity=excluded.capacity`,
		s.node, b.Address, b.Started.UnixNano(), time.Now().UnixNano(), b.Draining, max(b.Capacity, 0))
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// Nodes returns every registered node with its sandbox count, by name.
func (s *Postgres) Nodes(ctx context.Context) ([]Node, error) {
	rows, err := s.pool.Query(ctx, `SELECT n.name, n.address, n.started_ns, n.heartbeat_ns, n.draining, n.capacity,
			(SELECT count(*) FROM sandboxes sb WHERE sb.node = n.name)
		FROM nodes n ORDER BY n.name`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var n Node
		var started, beat int64
		if err := rows.Scan(&n.Name, &n.Address, &started, &beat, &n.Draining, &n.Capacity, &n.Sandboxes); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		n.Started, n.Heartbeat = time.Unix(0, started).UTC(), time.Unix(0, beat).UTC()
		out = append(out, n)
	}
	return out, rows.Err()
}

// SandboxNode returns the node that owns sandbox id. ErrNotFound if no node
// has a record of it.
func (s *Postgres) SandboxNode(ctx context.Context, id string) (string, error) {
	var node string
	err := s.pool.QueryRow(ctx, `SELECT node FROM sandboxes WHERE id = $1`, id).Scan(&node)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("sandbox node: %w", err)
	}
	return node, nil
}

// CountOwnedElsewhere counts owner's sandbox records on the other nodes
// (the per-key cap counts across the cluster).
func (s *Postgres) CountOwnedElsewhere(ctx context.Context, owner string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sandboxes WHERE owner = $1 AND node <> $2`, owner, s.node).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sandboxes: %w", err)
	}
	return n, nil
}

// NodeSandboxes returns the sandbox records of node (any node's, unlike
// ListSandboxes): the cluster's list reports a dead node's sandboxes as
// lost from them.
func (s *Postgres) NodeSandboxes(ctx context.Context, node string) ([]SandboxRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, owner, record FROM sandboxes WHERE node = $1 ORDER BY id`, node)
	if err != nil {
		return nil, fmt.Errorf("node sandboxes: %w", err)
	}
	defer rows.Close()
	var out []SandboxRow
	for rows.Next() {
		var r SandboxRow
		if err := rows.Scan(&r.ID, &r.Owner, &r.Record); err != nil {
			return nil, fmt.Errorf("node sandboxes: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
