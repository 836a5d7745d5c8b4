package dispatch

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/guard"
)

// orderAudit records, at each Append, whether the call's flush window was
// already closed.
type orderAudit struct {
	mu     sync.Mutex
	closed *bool
	seen   []bool
}

func (o *orderAudit) Append(_ context.Context, _ audit.Entry) (audit.Record, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, *o.closed)
	return audit.Record{}, nil
}

type windowKey struct{}

// A tool's run gets the flush window's context, and the window is closed
// before the call's audit record is appended: the record's commit is the
// sync the run's deferred writes wait for, so a write the run leaves behind
// must not ride on it. The same for a failed run; a denied call runs
// nothing and opens no window; with no audit log no window is opened.
func TestFlushWindowClosesBeforeTheRecord(t *testing.T) {
	var opened, closed int
	var isClosed bool
	win := func(ctx context.Context) (context.Context, func()) {
		opened++
		isClosed = false
		return context.WithValue(ctx, windowKey{}, opened), func() { closed++; isClosed = true }
	}
	au := &orderAudit{closed: &isClosed}
	d := New(Options{Audit: au, FlushWindow: win,
		Policy: policyFunc(func(a Assessment) (Decision, string) {
			if a.Risk == guard.Dangerous {
				return Deny, "test"
			}
			return Allow, ""
		})})
	var inRun []any
	var openInRun []bool
	fail := errors.New("run failed")
	for _, n := range []struct {
		name string
		risk guard.Risk
		err  error
	}{{"sandbox.ok", guard.Safe, nil}, {"sandbox.fails", guard.Safe, fail}, {"sandbox.denied", guard.Dangerous, nil}} {
		d.MustRegister(Tool{Name: n.name, Risk: n.risk, Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) {
			inRun = append(inRun, ctx.Value(windowKey{}))
			openInRun = append(openInRun, !isClosed)
			return "ok", n.err
		}})
	}
	if _, err := d.Dispatch(context.Background(), agent, "sandbox.ok", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dispatch(context.Background(), agent, "sandbox.fails", nil); !errors.Is(err, fail) {
		t.Fatalf("err = %v", err)
	}
	if _, err := d.Dispatch(context.Background(), agent, "sandbox.denied", nil); err == nil {
		t.Fatal("denied call ran")
	}
	if opened != 2 || closed != 2 {
		t.Fatalf("windows opened %d, closed %d; want 2 and 2 (none for the denied call)", opened, closed)
	}
	if len(inRun) != 2 || inRun[0] != 1 || inRun[1] != 2 || !openInRun[0] || !openInRun[1] {
		t.Fatalf("runs saw windows %v (open %v), want 1 and 2, open", inRun, openInRun)
	}
	if len(au.seen) != 3 || !au.seen[0] || !au.seen[1] || !au.seen[2] {
		t.Fatalf("window closed at each append: %v, want closed before all three records", au.seen)
	}

	opened = 0
	bare := New(Options{FlushWindow: win})
	bare.MustRegister(Tool{Name: "sandbox.ok", Risk: guard.Safe, Run: func(context.Context, auth.Caller, any) (any, error) { return "ok", nil }})
	if _, err := bare.Dispatch(context.Background(), agent, "sandbox.ok", nil); err != nil {
		t.Fatal(err)
	}
	if opened != 0 {
		t.Fatal("a dispatcher without an audit log opened a flush window: no durable commit follows its calls")
	}
}
