package sandbox

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/orphan"
)

// deadNodeRecords is a cluster's store as a live node sees it, holding
// one record of node from, which is dead: TakeOver moves it here as
// update rewrites it (or refuses as update says).
type deadNodeRecords struct {
	memRecords
	mu    sync.Mutex
	rec   Record
	from  string
	asked int // TakeOver calls
	moved int // records moved
}

func (r *deadNodeRecords) TakeOver(_ context.Context, id, from string, update func(Record) (Record, error)) (Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	if id != r.rec.ID || from != r.from {
		return Record{}, fault.New(fault.Conflict, "moved")
	}
	rec, err := update(r.rec)
	if err != nil {
		return Record{}, err
	}
	r.rec, r.from = rec, "here"
	r.moved++
	return rec, nil
}

func (r *deadNodeRecords) HeldHere(_ context.Context, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return id == r.rec.ID && r.from == "here", nil
}

func (r *deadNodeRecords) counts() (asked, moved int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked, r.moved
}

// TestTakeOverIsTheCallersDispatchedCall: a hibernated sandbox of a dead
// node (its image in the snapshot store both nodes share) moves to this
// node only by sandbox.adopt, dispatched inside a call of the request the
// forwarder marked (orphan.With) — and only for its owner: outside a
// dispatched call, without the mark, during HALT, under a policy that
// denies it, for a viewer or another key, the store is never asked to
// move it (another key: asked, and refused by whose it is). Before, the
// forwarder moved it for any request with a credential-shaped header.
func TestTakeOverIsTheCallersDispatchedCall(t *testing.T) {
	ctx := context.Background()
	cfgA := withSnapshots(t, testConfig(t))
	recsA := &memRecords{}
	a := newManager(t, cfgA, recsA)
	s := create(t, a, Spec{Limits: Limits{DiskBytes: 64 << 20}})
	id := s.ID()
	sh(t, s, "echo kept > f")
	if _, err := a.Hibernate(ctx, owner, id); err != nil {
		t.Fatal(err)
	}
	recsA.mu.Lock()
	rec := recsA.recs[id]
	recsA.mu.Unlock()

	t.Run("on another node", func(t *testing.T) { // a manager of its own (cgroup base by test name)
		cfgB := testConfig(t)
		cfgB.Snapshots = cfgA.Snapshots
		dead := &deadNodeRecords{rec: rec, from: "node-a"}
		b := newManager(t, cfgB, dead)
		look := func(mark bool) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				if mark {
					ctx = orphan.With(ctx, id, "node-a")
				}
				_, err := b.Resolve(ctx, auth.Caller{KeyID: owner.KeyID, Role: auth.RoleAgent}, id)
				return err
			}
		}
		viewer := auth.Caller{KeyID: "key-v", Role: auth.RoleViewer}
		other := auth.Caller{KeyID: "key-b", Role: auth.RoleAgent}
		refused := []struct {
			name  string
			opts  callOpts
			mark  bool
			want  fault.Kind
			asked int
		}{
			{"not marked", callOpts{}, false, fault.NotFound, 0},
			{"halted", callOpts{halt: &haltSwitch{on: true}}, true, fault.Conflict, 0},
			{"policy denies sandbox.adopt", callOpts{policy: denyTools{ToolAdopt.Name()}}, true, fault.Forbidden, 0},
			{"a viewer", callOpts{as: &viewer}, true, fault.Forbidden, 0},
			{"another key", callOpts{as: &other}, true, fault.NotFound, 1},
		}
		for _, tc := range refused {
			t.Run(tc.name, func(t *testing.T) {
				tc.opts.audit = &records{}
				asked, _ := dead.counts()
				fn := look(tc.mark)
				if tc.opts.as != nil {
					c := *tc.opts.as
					fn = func(ctx context.Context) error {
						_, err := b.Resolve(orphan.With(ctx, id, "node-a"), c, id)
						return err
					}
				}
				if err := inCall(t, b, tc.opts, fn); !fault.Is(err, tc.want) {
					t.Fatalf("err %v, want %s", err, tc.want)
				}
				if n, moved := dead.counts(); n-asked != tc.asked || moved != 0 {
					t.Fatalf("the store was asked %d times and moved %d records; want %d asks, nothing moved", n-asked, moved, tc.asked)
				}
				got := tc.opts.audit.actions()
				if tc.mark && (len(got) == 0 || got[0] != ToolAdopt.Name()+":denied" && got[0] != ToolAdopt.Name()+":error") {
					t.Fatalf("audit %v: want sandbox.adopt refused first", got)
				}
			})
		}
		// Marked, but outside any dispatched call: refused, never done.
		if err := look(true)(ctx); !fault.Is(err, fault.NotFound) {
			t.Fatalf("outside a call: %v", err)
		}
		// A sandbox that is not hibernated stays lost with its node.
		dead.mu.Lock()
		dead.rec.Restore = nil
		dead.mu.Unlock()
		if err := inCall(t, b, callOpts{}, look(true)); !fault.Is(err, fault.Unavailable) {
			t.Fatalf("a sandbox that was not hibernated: %v, want it lost", err)
		}
		dead.mu.Lock()
		dead.rec = rec
		dead.mu.Unlock()

		// The owner's call moves it: a record of the owner's sandbox.adopt,
		// nested in the call; then the sandbox resumes here with its files.
		au := &records{}
		if err := inCall(t, b, callOpts{audit: au}, look(true)); err != nil {
			t.Fatal(err)
		}
		if _, moved := dead.counts(); moved != 1 || dead.rec.Moves != 1 {
			t.Fatalf("moved %d records (moves %d), want one", moved, dead.rec.Moves)
		}
		if got := au.actions(); len(got) != 2 || got[0] != ToolAdopt.Name()+":allowed" {
			t.Fatalf("audit %v: want sandbox.adopt allowed, then the outer call", got)
		}
		if e := au.entries[0]; e.Actor != owner.KeyID || e.Sandbox != id || e.Detail["from"] != "node-a" {
			t.Fatalf("the take-over's record: %+v", e)
		}
		moved, err := b.Get(owner, id)
		if err != nil || moved.State() != Hibernated {
			t.Fatalf("after the take-over: %v, state %v", err, moved)
		}
		if r := sh(t, moved, "cat f"); r.Stdout != "kept\n" {
			t.Errorf("resumed here: %q %q", r.Stdout, r.Stderr)
		}
	})
}

// TestEveryLookupByIDTakesOver: each Manager call that names a sandbox by
// id (not only Resolve and the sandbox.* tools) takes over a dead node's
// hibernated sandbox for its owner's call, so no call answers 404 for a
// sandbox that any other call would have resumed here.
func TestEveryLookupByIDTakesOver(t *testing.T) {
	calls := []struct {
		name string
		call func(ctx context.Context, m *Manager, id string) error
	}{
		{"ttl", func(ctx context.Context, m *Manager, id string) error {
			_, err := m.SetTTL(ctx, owner, id, time.Hour)
			return err
		}},
		{"network", func(ctx context.Context, m *Manager, id string) error {
			_, err := m.UpdateNetwork(ctx, owner, NetworkUpdate{ID: id, Allow: []string{}})
			return err
		}},
		{"snapshot", func(ctx context.Context, m *Manager, id string) error {
			_, err := m.Snapshot(ctx, owner, id, "s")
			return err
		}},
		{"hibernate", func(ctx context.Context, m *Manager, id string) error {
			_, err := m.Hibernate(ctx, owner, id)
			return err
		}},
		{"delete", func(ctx context.Context, m *Manager, id string) error {
			return m.Delete(ctx, owner, id)
		}},
		{"resume", func(ctx context.Context, m *Manager, id string) error {
			return m.Resume(ctx, owner, id)
		}},
		{"port", func(ctx context.Context, m *Manager, id string) error {
			if c, err := m.DialPort(ctx, owner, id, 8000); err == nil {
				_ = c.Close()
			}
			return nil // nothing listens there; the take-over is what counts
		}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfgA := withSnapshots(t, testConfig(t))
			recsA := &memRecords{}
			a := newManager(t, cfgA, recsA)
			s := create(t, a, Spec{Limits: Limits{DiskBytes: 64 << 20}})
			id := s.ID()
			if _, err := a.Hibernate(ctx, owner, id); err != nil {
				t.Fatal(err)
			}
			recsA.mu.Lock()
			rec := recsA.recs[id]
			recsA.mu.Unlock()
			cfgB := testConfig(t)
			cfgB.Snapshots = cfgA.Snapshots
			dead := &deadNodeRecords{rec: rec, from: "node-a"}
			b := newManager(t, cfgB, dead)
			err := inCall(t, b, callOpts{}, func(ctx context.Context) error {
				return tc.call(orphan.With(ctx, id, "node-a"), b, id)
			})
			if _, moved := dead.counts(); moved != 1 {
				t.Fatalf("%s: moved %d records (err %v), want the owner's call to take the sandbox over", tc.name, moved, err)
			}
		})
	}
}
