package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// approvalsHook runs fn when asked, then approves (nil) or answers its
// error: the approval of a call that waited while fn happened.
type approvalsHook func() error

func (f approvalsHook) Request(context.Context, auth.Caller, *Tool, Assessment, any) error {
	return f()
}

// TestHaltIsCheckedAfterTheApprovalWait: issue 38 row 4. A sandbox.create
// waiting with X-Approval-Wait, halted and then approved, ran: HALT was
// checked before the wait only.
func TestHaltIsCheckedAfterTheApprovalWait(t *testing.T) {
	h := &halt{}
	au := &memAudit{}
	d := New(Options{Audit: au, Halt: h,
		Policy: policyFunc(func(Assessment) (Decision, string) { return NeedsApproval, "test" }),
		// The operator halts while the call waits, then approves it.
		Approvals: approvalsHook(func() error { h.on = true; return nil }),
	})
	ran := false
	d.MustRegister(Tool{Name: "sandbox.create", Risk: guard.Medium,
		Run: func(context.Context, auth.Caller, any) (any, error) { ran = true; return nil, nil }})
	_, err := d.Dispatch(context.Background(), agent, "sandbox.create", nil)
	if fault.KindOf(err) != fault.Conflict || ran {
		t.Fatalf("approved after HALT: err %v, ran %v", err, ran)
	}
	if e := au.last(); e.Verdict != "denied" || e.Detail["reason"] != "halted" {
		t.Fatalf("record %+v", e)
	}
}

// TestRedefinitionAfterApprovalVoidsIt: issue 38 row 2. The approval bound
// key, tool and arguments, not the definition: a custom tool redefined
// after its call was approved ran the new definition.
func TestRedefinitionAfterApprovalVoidsIt(t *testing.T) {
	digest := "v1"
	au := &memAudit{}
	d := New(Options{Audit: au,
		Policy: policyFunc(func(Assessment) (Decision, string) { return NeedsApproval, "test" }),
		// The owner redefines the tool while its call waits; then the
		// operator approves what was shown (v1).
		Approvals: approvalsHook(func() error { digest = "v2"; return nil }),
	})
	ran := false
	d.MustRegister(Tool{Name: "t2", Risk: guard.Dangerous,
		Assess: func(any) Assessment { return Assessment{Risk: guard.Dangerous, Digest: digest} },
		Run:    func(context.Context, auth.Caller, any) (any, error) { ran = true; return nil, nil }})
	_, err := d.Dispatch(context.Background(), agent, "t2", nil)
	if fault.KindOf(err) != fault.Conflict || ran {
		t.Fatalf("approved v1, ran v2: err %v, ran %v", err, ran)
	}
	if e := au.last(); e.Verdict != "denied" || e.Detail["reason"] != "redefined" {
		t.Fatalf("record %+v", e)
	}
	// Unchanged, the approved call runs.
	d2 := New(Options{Policy: policyFunc(func(Assessment) (Decision, string) { return NeedsApproval, "test" }),
		Approvals: approvalsHook(func() error { return nil })})
	d2.MustRegister(Tool{Name: "t2", Risk: guard.Dangerous,
		Assess: func(any) Assessment { return Assessment{Risk: guard.Dangerous, Digest: "v1"} },
		Run:    func(context.Context, auth.Caller, any) (any, error) { ran = true; return nil, nil }})
	if _, err := d2.Dispatch(context.Background(), agent, "t2", nil); err != nil || !ran {
		t.Fatalf("approved and unchanged: %v, ran %v", err, ran)
	}
}

// TestApprovedScopeCoversOnlyWhatWasShown: issue 38 row 2. Inside an
// approved call every nested call was exempt from approval, so a step
// flagged for a rule the operator never saw (credential-read, after a
// redefinition or from arguments built at run time) ran "inside an
// approved call".
func TestApprovedScopeCoversOnlyWhatWasShown(t *testing.T) {
	outer := Assessment{Risk: guard.Dangerous, Rules: []string{"pipe-to-shell"}, Names: []string{"echo", "sh"}, Paths: []string{"/workspace"}}
	cases := []struct {
		name  string
		inner Assessment
		want  bool
	}{
		{"what was shown", Assessment{Risk: guard.Dangerous, Rules: []string{"pipe-to-shell"}, Names: []string{"sh"}, Paths: []string{"/workspace"}}, true},
		{"nothing flagged", Assessment{Risk: guard.Dangerous}, true},
		{"a rule never shown", Assessment{Risk: guard.Dangerous, Rules: []string{"credential-read"}, Names: []string{"cat"}}, false},
		{"a command never shown", Assessment{Risk: guard.Dangerous, Names: []string{"curl"}}, false},
		{"a path never shown", Assessment{Risk: guard.Dangerous, Paths: []string{"/etc/shadow"}}, false},
		{"dynamic, not shown", Assessment{Risk: guard.Dangerous, Dynamic: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := withApproved(context.Background(), agent, outer)
			if got := inApproved(ctx, agent, tc.inner); got != tc.want {
				t.Fatalf("covered %v, want %v", got, tc.want)
			}
			other := auth.Caller{KeyID: "k-other", Role: auth.RoleAgent}
			if inApproved(ctx, other, tc.inner) {
				t.Fatal("another key is covered")
			}
		})
	}
}

// TestPendingRecordSaysWhy: issue 38. The pending record's detail.error
// said "internal error".
func TestPendingRecordSaysWhy(t *testing.T) {
	au := &memAudit{}
	d := New(Options{Audit: au,
		Policy:    policyFunc(func(Assessment) (Decision, string) { return NeedsApproval, "test" }),
		Approvals: approvalsHook(func() error { return &ApprovalRequired{ID: "apr_1"} }),
	})
	d.MustRegister(Tool{Name: "x.y", Risk: guard.Dangerous, Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	_, err := d.Dispatch(context.Background(), agent, "x.y", nil)
	var ar *ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatal(err)
	}
	e := au.last()
	if e.Verdict != "pending" || e.Detail["error"] != "waiting for an operator's approval (apr_1)" {
		t.Fatalf("pending record %+v", e)
	}
}

// waitingApprovals holds every call that asks to wait until release is
// closed, and answers pending.
type waitingApprovals struct {
	waiting chan struct{}
	release chan struct{}
}

func (w *waitingApprovals) Request(ctx context.Context, _ auth.Caller, _ *Tool, _ Assessment, _ any) error {
	if ApprovalWait(ctx) > 0 {
		w.waiting <- struct{}{}
		<-w.release
	}
	return &ApprovalRequired{ID: "apr_x"}
}

// TestApprovalWaitsAreCappedPerKey: issue 38 row 5. 2 × 9,990 waiting
// calls of one flagged custom tool from one key took the server to its fd
// limit: identical calls shared one pending approval, so the per-key
// pending cap never applied. Each waiting call now holds one of the key's
// approvals slots; beyond them a call is answered pending at once.
func TestApprovalWaitsAreCappedPerKey(t *testing.T) {
	lim := ratelimit.New(ratelimit.Options{Rules: ratelimit.Rules{ratelimit.Approvals: {Concurrent: 2}}})
	w := &waitingApprovals{waiting: make(chan struct{}), release: make(chan struct{})}
	d := New(Options{Limiter: lim, Approvals: w,
		Policy: policyFunc(func(Assessment) (Decision, string) { return NeedsApproval, "test" })})
	d.MustRegister(Tool{Name: "t2", Risk: guard.Dangerous, Custom: true, Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	ctx := WithApprovalWait(context.Background(), time.Minute)
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := d.Dispatch(ctx, agent, "t2", nil); errs <- err }()
		<-w.waiting // the call holds a slot and waits
	}
	// The third identical call does not wait: it is answered pending at
	// once (a test that hangs here is the bug).
	if _, err := d.Dispatch(ctx, agent, "t2", nil); !errors.As(err, new(*ApprovalRequired)) {
		t.Fatalf("third call: %v", err)
	}
	// Another key has slots of its own.
	other := auth.Caller{KeyID: "k-other", Role: auth.RoleAgent}
	go func() { _, err := d.Dispatch(ctx, other, "t2", nil); errs <- err }()
	<-w.waiting
	close(w.release)
	for range 3 {
		if err := <-errs; !errors.As(err, new(*ApprovalRequired)) {
			t.Fatalf("waiting call: %v", err)
		}
	}
	// The slots came back.
	w.release = make(chan struct{})
	go func() { _, err := d.Dispatch(ctx, agent, "t2", nil); errs <- err }()
	<-w.waiting
	close(w.release)
	if err := <-errs; !errors.As(err, new(*ApprovalRequired)) {
		t.Fatalf("a call after the slots came back: %v", err)
	}
}
