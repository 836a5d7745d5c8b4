package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sandhold/sandhold/internal/cluster"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/store"
)

// TakeOver makes records a sandbox.TakeOverRecords on a cluster's store:
// sandbox id's record moves from node from, dead for cluster.DeadAfter,
// to this node, rewritten by update, in one conditional write (the
// record must not have changed since it was read).
func (r records) TakeOver(ctx context.Context, id, from string, update func(sandbox.Record) (sandbox.Record, error)) (sandbox.Record, error) {
	cl := r.st.Cluster()
	if cl == nil {
		return sandbox.Record{}, fault.New(fault.Unsupported, "only a cluster's store moves sandboxes between nodes")
	}
	row, node, err := cl.SandboxOn(ctx, id)
	if err != nil {
		return sandbox.Record{}, err
	}
	if node != from {
		return sandbox.Record{}, fmt.Errorf("take over sandbox %s: %w: it is on %s now", id, store.ErrConflict, node)
	}
	var rec sandbox.Record
	if err := json.Unmarshal(row.Record, &rec); err != nil {
		return sandbox.Record{}, fmt.Errorf("sandbox record %s: %w", id, err)
	}
	if rec, err = update(rec); err != nil {
		return sandbox.Record{}, err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return sandbox.Record{}, err
	}
	next := store.SandboxRow{ID: id, Owner: row.Owner, Record: b}
	if err := cl.TakeOverSandbox(ctx, id, from, cluster.DeadAfter, row, next); err != nil {
		return sandbox.Record{}, err
	}
	return rec, nil
}

// HeldHere tells whether sandbox id's record is still this node's (always,
// on one host's store).
func (r records) HeldHere(ctx context.Context, id string) (bool, error) {
	cl := r.st.Cluster()
	if cl == nil {
		return true, nil
	}
	_, node, err := cl.SandboxOn(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return node == cl.NodeName(), nil
}

// adoptHibernated is the forwarder's hook for a request to a sandbox whose
// node is dead: a hibernated sandbox of that node whose image this node's
// snapshot store holds moves here, and the request is served here.
func (d *Daemon) adoptHibernated(r *http.Request, id, from string) bool {
	err := d.sandboxes.AdoptHibernated(r.Context(), id, from)
	if err != nil {
		d.log.Debug("cluster: a dead node's sandbox stays lost", "id", id, "node", from, "err", err)
	}
	return err == nil
}
