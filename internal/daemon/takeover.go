package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sandhold/sandhold/internal/cluster"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/store"
)

// TakeOver makes records a sandbox.TakeOverRecords on a cluster's store:
// sandbox id's record moves from node from, dead for cluster.DeadAfter,
// to this node, rewritten by update, in one conditional write (the
// record must not have changed since it was read). update decides first
// (whose the sandbox is, whether it may move), so a caller it refuses
// learns nothing else; the store's refusals come back as faults.
func (r records) TakeOver(ctx context.Context, id, from string, update func(sandbox.Record) (sandbox.Record, error)) (sandbox.Record, error) {
	cl := r.st.Cluster()
	if cl == nil {
		return sandbox.Record{}, fault.New(fault.Unsupported, "only a cluster's store moves sandboxes between nodes")
	}
	row, node, err := cl.SandboxOn(ctx, id)
	if err != nil {
		return sandbox.Record{}, takeOverFault(id, err)
	}
	var rec sandbox.Record
	if err := json.Unmarshal(row.Record, &rec); err != nil {
		return sandbox.Record{}, fmt.Errorf("sandbox record %s: %w", id, err)
	}
	if rec, err = update(rec); err != nil {
		return sandbox.Record{}, err
	}
	if node != from {
		return sandbox.Record{}, takeOverFault(id, fmt.Errorf("%w: it is on %s now", store.ErrConflict, node))
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return sandbox.Record{}, err
	}
	next := store.SandboxRow{ID: id, Owner: row.Owner, Record: b}
	if err := cl.TakeOverSandbox(ctx, id, from, cluster.DeadAfter, row, next); err != nil {
		return sandbox.Record{}, takeOverFault(id, err)
	}
	return rec, nil
}

// takeOverFault is what the client of a take-over the store refused
// hears: the record is gone, or it moved, changed or its node beat again
// in between (a later call finds it where it is then).
func takeOverFault(id string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fault.Wrap(fault.NotFound, sandbox.ErrNoSandbox, "sandbox not found")
	case errors.Is(err, store.ErrConflict):
		return fault.Wrap(fault.Conflict, fmt.Errorf("take over sandbox %s: %w", id, err), "the sandbox moved, or its node came back, while this node took it over; try again")
	}
	return fmt.Errorf("take over sandbox %s: %w", id, err)
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
