package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/control"
	"github.com/sandhold/sandhold/internal/policy"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
	"github.com/sandhold/sandhold/internal/testenv"
)

type freezer struct {
	mu      sync.Mutex
	running []string
	frozen  []string
	thawed  []string
}

func (f *freezer) HaltFreeze(string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen, f.running = append(f.frozen, f.running...), nil
	return f.frozen
}

func (f *freezer) HaltThaw(ids []string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.thawed = append(f.thawed, ids...)
	return len(ids)
}

func (f *freezer) counts() (frozen, thawed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.frozen), len(f.thawed)
}

type node struct {
	st  *store.Postgres
	ctl *control.Control
	pol *policy.Policy
	frz *freezer
}

func startNode(t *testing.T, url string, running ...string) *node {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	n := &node{st: st, frz: &freezer{running: running}}
	if n.ctl, err = control.Load(ctx, st, n.frz); err != nil {
		t.Fatal(err)
	}
	if n.pol, err = policy.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := Follow(fctx, st, nil, map[string]Reloader{control.SettingKey: n.ctl.Refresh, policy.SettingKey: n.pol.Reload})
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// A HALT on one node freezes the sandboxes of the others, the unhalt thaws
// them, and a policy change is in force everywhere.
func TestHaltAndPolicyReachEveryNode(t *testing.T) {
	url := pgtest.URL(t)
	a, b, c := startNode(t, url, "a1"), startNode(t, url, "b1", "b2"), startNode(t, url, "c1")
	ctx := context.Background()
	time.Sleep(200 * time.Millisecond) // let the followers listen (they resync anyway)

	t0 := time.Now()
	if _, err := b.ctl.Halt(ctx, "key_admin", "incident"); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*node{"a": a, "c": c} {
		testenv.Eventually(t, "halt on "+name, func() bool { h, _ := n.ctl.Halted(); f, _ := n.frz.counts(); return h && f == 1 })
		d := time.Since(t0)
		t.Logf("HALT on node b in force on node %s after %v", name, d)
	}
	t0 = time.Now()
	if _, err := a.ctl.Unhalt(ctx); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*node{"b": b, "c": c} {
		testenv.Eventually(t, "unhalt on "+name, func() bool { h, _ := n.ctl.Halted(); return !h })
		d := time.Since(t0)
		t.Logf("unhalt on node a in force on node %s after %v", name, d)
	}
	if _, th := b.frz.counts(); th != 2 {
		t.Fatalf("node b thawed %d sandboxes, want its 2", th)
	}

	doc := policy.Default()
	r := doc.Roles["agent"]
	r.AllowUpTo, r.ApproveUpTo = "safe", "none"
	doc.Roles["agent"] = r
	t0 = time.Now()
	if err := c.pol.Set(ctx, doc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "policy on a", func() bool { return a.pol.Document().Roles["agent"].AllowUpTo == "safe" })
	d := time.Since(t0)
	t.Logf("policy set on node c in force on node a after %v", d)
}

// A HALT stored while a node was starting (before it listened) is applied
// by the first resync, not missed.
func TestHaltBeforeListeningIsNotMissed(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	frz := &freezer{running: []string{"x"}}
	ctl, err := control.Load(ctx, st, frz)
	if err != nil {
		t.Fatal(err)
	}
	other := startNode(t, url)
	if _, err := other.ctl.Halt(ctx, "k", "r"); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := Follow(fctx, st, nil, map[string]Reloader{control.SettingKey: ctl.Refresh})
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, "halt applied by the first resync", func() bool { h, _ := ctl.Halted(); return h })
}
