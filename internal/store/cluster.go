package store

import (
	"context"
	"time"
)

// Cluster is what the nodes of a cluster share beyond a Store: who the
// nodes are and where each sandbox runs, a node's heartbeat, a key's
// sandboxes on the other nodes, notifications of settings another node
// changed, approvals every node decides alike, and the move of a dead
// node's sandbox to a live one. A shared PostgreSQL store offers it; one
// host's SQLite does not (Store.Cluster is nil), so a caller asks the
// store which deployment it serves instead of asking which type it is.
type Cluster interface {
	// NodeName is the name this node writes into sandbox records.
	NodeName() string
	// Nodes returns every registered node with its sandbox count, by name.
	Nodes(ctx context.Context) ([]Node, error)
	// Heartbeat registers this node as b says, or refreshes it.
	Heartbeat(ctx context.Context, b Beat) error
	// SandboxNode returns the node that owns sandbox id; ErrNotFound if
	// no node has a record of it.
	SandboxNode(ctx context.Context, id string) (string, error)
	// NodeSandboxes returns the sandbox records of node (any node's).
	NodeSandboxes(ctx context.Context, node string) ([]SandboxRow, error)
	// CountOwnedElsewhere counts owner's sandbox records on the other
	// nodes (the per-key cap counts across the cluster).
	CountOwnedElsewhere(ctx context.Context, owner string) (int, error)
	// WatchChanges calls fn for each change another node announces until
	// ctx ends (ChannelResync first, each time it starts listening).
	WatchChanges(ctx context.Context, fn func(channel, payload string))
	// SandboxOn returns sandbox id's record and the node that holds it;
	// ErrNotFound if no node does.
	SandboxOn(ctx context.Context, id string) (SandboxRow, string, error)
	// TakeOverSandbox moves sandbox id's record from the dead node from to
	// this one, written as updated, if it still reads old and from has
	// not beaten within deadAfter; ErrConflict otherwise.
	TakeOverSandbox(ctx context.Context, id, from string, deadAfter time.Duration, old, updated SandboxRow) error
	// UpdateApprovals runs fn on every stored approval with the approvals
	// of all nodes locked, and stores what it returns in one transaction.
	UpdateApprovals(ctx context.Context, fn func(rows []ApprovalRow) (put []ApprovalRow, del []string, err error)) error
}

var _ Cluster = (*Postgres)(nil)

// Cluster: the nodes sharing this PostgreSQL store.
func (s *Postgres) Cluster() Cluster { return s }

// Cluster: one host's file is no cluster.
func (s *SQLite) Cluster() Cluster { return nil }
