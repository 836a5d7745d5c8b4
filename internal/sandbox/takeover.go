package sandbox

import (
	"context"
	"errors"

	"github.com/sandhold/sandhold/internal/fault"
)

// In a cluster each sandbox lives on one node: its workspace image, init
// and cgroups are that node's, and when the node dies the sandbox is lost
// with it. A hibernated sandbox is the exception: nothing of it is left on
// its node — its image is parked in the snapshot store and its record in
// the shared database — so when the store is a directory every node
// mounts (SANDBOX_SNAPSHOT_DIR), any node can take it over and resume it.

// TakeOverRecords is Records that can move a record from a dead node to
// this one (the daemon's adapter of the PostgreSQL store).
type TakeOverRecords interface {
	// TakeOver moves sandbox id's record from node from to this node,
	// rewritten by update, provided from is dead and the record did not
	// change in between; it returns the record as written.
	TakeOver(ctx context.Context, id, from string, update func(Record) (Record, error)) (Record, error)
	// HeldHere tells whether sandbox id's record is still this node's.
	HeldHere(ctx context.Context, id string) (bool, error)
}

// stillHere refuses to resume hibernated sandbox id here once another node
// took it over: this node was cut off from the others long enough to count
// as dead, and the sandbox's image now belongs to the node that took it.
// (A take-over in the moment between this check and the image's move is
// not prevented: the later of the two resumes then finds no image.)
func (m *Manager) stillHere(ctx context.Context, id string) error {
	tr, ok := m.records.(TakeOverRecords)
	if !ok {
		return nil
	}
	here, err := tr.HeldHere(ctx, id)
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "cannot tell whether another node took this sandbox over")
	}
	if !here {
		return fault.New(fault.Conflict, "another node took this hibernated sandbox over while this one was cut off; its calls are served there")
	}
	return nil
}

// errNotAdoptable: the sandbox cannot move to this node (it is not
// hibernated, or its image is not in this node's snapshot store).
var errNotAdoptable = errors.New("not adoptable")

// AdoptHibernated takes over sandbox id, hibernated on node from whose
// heartbeat stopped, when this node's snapshot store holds its parked
// image: the sandbox is listed here, still hibernated, under a host id
// range of this node (its next start re-owns its files to it, as any
// restore does), and its next use resumes it here. A sandbox that is not
// hibernated is never taken: its workspace is on the dead node.
func (m *Manager) AdoptHibernated(ctx context.Context, id, from string) error {
	tr, ok := m.records.(TakeOverRecords)
	if !ok {
		return fault.New(fault.Unsupported, "this server's store cannot move sandboxes between nodes")
	}
	st, err := m.snapStore()
	if err != nil {
		return err
	}
	m.adoptMu.Lock()
	defer m.adoptMu.Unlock()
	m.mu.Lock()
	_, here := m.sandboxes[id]
	closed := m.closed
	m.mu.Unlock()
	switch {
	case here:
		return nil // taken over already
	case closed:
		return fault.New(fault.Unavailable, "server is shutting down")
	}
	slot := -1
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	rec, err := tr.TakeOver(ctx, id, from, func(r Record) (Record, error) {
		if r.Restore == nil || !r.Restore.Hibernated {
			return r, errNotAdoptable
		}
		man, err := st.Get("", true, r.Restore.Snapshot)
		if err != nil || !st.Holds(man) {
			return r, errNotAdoptable
		}
		if release == nil {
			if release, err = m.reserveDisk(r.Spec.Limits.DiskBytes); err != nil {
				return r, err
			}
		}
		if slot < 0 {
			if slot, err = m.allocSlot(); err != nil {
				return r, err
			}
		}
		r.Slot = slot
		r.Moves++
		return r, nil
	})
	if err != nil {
		if slot >= 0 {
			m.freeSlot(slot)
		}
		return err
	}
	s := newSandbox(m, rec)
	m.mu.Lock()
	m.listLocked(s)
	m.mu.Unlock()
	if err := m.netAttach(id, rec.Spec.Network); err != nil {
		m.log.Error("egress policy", "id", id, "err", err) // its proxy denies everything
	}
	m.log.Info("took over a hibernated sandbox from a dead node", "id", id, "from", from)
	m.audit(context.WithoutCancel(ctx), Event{Actor: "system", Action: "sandbox.adopt", Sandbox: id, Verdict: "allowed",
		Detail: map[string]any{"from": from, "snapshot": rec.Restore.Snapshot}})
	return nil
}
