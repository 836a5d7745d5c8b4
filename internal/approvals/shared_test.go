package approvals

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// TestMain stops the throw-away PostgreSQL of the shared-store tests.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// sharedNode is one node's approvals on the shared store, with a
// dispatcher whose one tool counts its runs in ran (shared by the nodes).
func sharedNode(t *testing.T, url string, ran *atomic.Int64) (*dispatch.Dispatcher, *Service) {
	t.Helper()
	pg, err := store.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	svc := New(Options{Shared: pg, PollEvery: 10 * time.Millisecond})
	d := dispatch.New(dispatch.Options{Policy: always{}, Approvals: svc})
	d.MustRegister(dispatch.Tool{Name: "exec.run", Risk: guard.Dangerous,
		Run: func(context.Context, auth.Caller, any) (any, error) { ran.Add(1); return "ok", nil }})
	return d, svc
}

// Two nodes on one store: an approval asked for on a, decided on b, is
// used by the caller's retry on b, once; a caller waiting on a sees a
// decision made on b.
func TestSharedApprovalsAcrossNodes(t *testing.T) {
	url := pgtest.URL(t)
	var ran atomic.Int64
	dA, svcA := sharedNode(t, url, &ran)
	dB, svcB := sharedNode(t, url, &ran)

	_, err := dA.Call(bgCtx, agent, "exec.run", cmdArg("rm -rf /"))
	id := pendingID(t, err)
	if l := svcB.List(Pending); len(l) != 1 || l[0].ID != id {
		t.Fatalf("node b's pending list: %+v", l)
	}
	// The same call through b while pending: the same approval.
	if _, err := dB.Call(bgCtx, agent, "exec.run", cmdArg("rm -rf /")); pendingID(t, err) != id {
		t.Fatal("a repeated call through another node made a second approval")
	}
	if _, err := svcB.Get(other, id); fault.KindOf(err) != fault.NotFound {
		t.Fatal("another key can read the approval")
	}
	if _, err := svcB.Decide(admin, id, true, "ok once"); err != nil {
		t.Fatal(err)
	}
	if _, err := svcA.Decide(admin, id, false, ""); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("decided twice through two nodes: %v", err)
	}
	// The grant is used once, by whichever node's call comes first: many
	// identical calls at once through both nodes run the tool once.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { _, _ = []*dispatch.Dispatcher{dA, dB}[i%2].Call(bgCtx, agent, "exec.run", cmdArg("rm -rf /")) })
	}
	wg.Wait()
	if n := ran.Load(); n != 1 {
		t.Fatalf("one grant ran the tool %d times across two nodes", n)
	}
	if ap, err := svcA.Get(agent, id); err != nil || ap.Status != Used || ap.DecidedBy != admin.KeyID {
		t.Fatalf("after use: %+v %v", ap, err)
	}

	// A caller waiting on a is released by a decision on b. (The calls
	// above that found the grant used asked for a new approval: not it.)
	known := map[string]bool{}
	for _, ap := range svcB.List(Pending) {
		known[ap.ID] = true
	}
	res := make(chan error, 1)
	go func() {
		_, err := dA.Call(dispatch.WithApprovalWait(bgCtx, time.Minute), agent, "exec.run", cmdArg("shutdown now"))
		res <- err
	}()
	var waiting string
	for waiting == "" {
		for _, ap := range svcB.List(Pending) {
			if !known[ap.ID] {
				waiting = ap.ID
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := svcB.Decide(admin, waiting, false, "not today"); err != nil {
		t.Fatal(err)
	}
	if err := <-res; fault.KindOf(err) != fault.Forbidden {
		t.Fatalf("waiting caller after a denial on another node: %v", err)
	}
	if ran.Load() != 1 {
		t.Fatal("a denied call ran")
	}
}

// brokenStore fails every step: approvals fail closed.
type brokenStore struct{}

func (brokenStore) UpdateApprovals(context.Context, func([]store.ApprovalRow) ([]store.ApprovalRow, []string, error)) error {
	return context.DeadlineExceeded
}

func TestSharedStoreDownFailsClosed(t *testing.T) {
	svc := New(Options{Shared: brokenStore{}})
	var ran atomic.Int64
	d := dispatch.New(dispatch.Options{Policy: always{}, Approvals: svc})
	d.MustRegister(dispatch.Tool{Name: "exec.run", Risk: guard.Dangerous,
		Run: func(context.Context, auth.Caller, any) (any, error) { ran.Add(1); return "ok", nil }})
	if _, err := d.Call(bgCtx, agent, "exec.run", cmdArg("x")); fault.KindOf(err) != fault.Unavailable || ran.Load() != 0 {
		t.Fatalf("store down: %v, ran %d", err, ran.Load())
	}
	if _, err := svc.Decide(admin, "apr_x", true, ""); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("decide with the store down: %v", err)
	}
}
