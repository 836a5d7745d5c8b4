package sandbox

import (
	"context"

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

// Refusals of a take-over whose sandbox stays lost with its dead node.
var (
	errNotHibernated  = fault.New(fault.Unavailable, "sandbox lost: the node running it is down, and only a hibernated sandbox moves to another node")
	errImageElsewhere = fault.New(fault.Unavailable, "sandbox lost: the node running it is down, and this node's snapshot store does not hold its hibernated image")
)

// adoptHibernated takes over sandbox id, hibernated on node from whose
// heartbeat stopped, for caller c — sandbox.adopt's run (adopt.go;
// nothing else moves a sandbox). It moves only a sandbox c owns (an
// admin: any; another key's is NotFound, as Get says), only while from
// is dead (the store's conditional write), and only when this node's
// snapshot store holds its parked image: the sandbox is listed here,
// still hibernated, under a host id range of this node (its next start
// re-owns its files to it, as any restore does), and its next use resumes
// it here. A sandbox that is not hibernated is never taken: its workspace
// is on the dead node.
func (m *Manager) adoptHibernated(ctx context.Context, c Caller, id, from string) (Adoption, error) {
	tr, ok := m.records.(TakeOverRecords)
	if !ok {
		return Adoption{}, fault.New(fault.Unsupported, "this server's store cannot move sandboxes between nodes")
	}
	if _, err := m.snaps.Store(); err != nil {
		return Adoption{}, err
	}
	m.adoptMu.Lock()
	defer m.adoptMu.Unlock()
	m.mu.Lock()
	s := m.sandboxes[id]
	closed := m.closed
	m.mu.Unlock()
	switch {
	case s != nil:
		// Taken over already, by a call just before this one (its
		// record says so: no snapshot moved).
		if !c.Admin && s.rec.Owner != c.KeyID {
			return Adoption{}, errNoSuchSandbox()
		}
		return Adoption{Info: s.Info(), From: from}, nil
	case closed:
		return Adoption{}, fault.New(fault.Unavailable, "server is shutting down")
	}
	slot := -1
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	rec, err := tr.TakeOver(ctx, id, from, func(r Record) (Record, error) {
		// Whose it is comes first: another key learns nothing of it.
		if !c.Admin && r.Owner != c.KeyID {
			return r, errNoSuchSandbox()
		}
		if r.Restore == nil || !r.Restore.Hibernated {
			return r, errNotHibernated
		}
		if !m.snaps.Holds(r.Restore.Snapshot) {
			return r, errImageElsewhere
		}
		var err error
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
		return Adoption{}, err
	}
	s = newSandbox(m, rec)
	m.mu.Lock()
	m.listLocked(s)
	m.mu.Unlock()
	if err := m.netAttach(id, rec.Spec.Network); err != nil {
		m.log.Error("egress policy", "id", id, "err", err) // its proxy denies everything
	}
	m.log.Info("took over a hibernated sandbox from a dead node", "id", id, "from", from)
	return Adoption{Info: s.Info(), From: from, parked: rec.Restore.Snapshot}, nil
}
