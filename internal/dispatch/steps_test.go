package dispatch

import (
	"context"
	"errors"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// approvalsFunc answers Request with a fixed error (nil: approved).
type approvalsFunc func() error

func (f approvalsFunc) Request(context.Context, auth.Caller, *Tool, Assessment, any) error {
	return f()
}

func TestHaltLetsSafeToolsThroughButNotSandboxWork(t *testing.T) {
	d := New(Options{Halt: &halt{on: true}})
	ran := false
	run := func(context.Context, auth.Caller, any) (any, error) { ran = true; return nil, nil }
	d.MustRegister(Tool{Name: "sandbox.list", Risk: guard.Safe, Run: run})
	if _, err := d.Dispatch(context.Background(), agent, "sandbox.list", nil); err != nil || !ran {
		t.Fatalf("safe tool while halted: err %v ran %v", err, ran)
	}
	ran = false
	d.MustRegister(Tool{Name: "file.read", Risk: guard.Safe, Category: ratelimit.File, Run: run})
	if _, err := d.Dispatch(context.Background(), agent, "file.read", nil); fault.KindOf(err) != fault.Conflict || ran {
		t.Fatalf("safe file tool while halted: err %v ran %v", err, ran)
	}
}

func TestRateRulesPerCaller(t *testing.T) {
	lim := ratelimit.New(ratelimit.Options{})
	d := New(Options{Limiter: lim, RateRules: func(c auth.Caller) ratelimit.Rules {
		if c.KeyID == agent.KeyID {
			return ratelimit.Rules{ratelimit.Exec: {PerMinute: 0.001, Burst: 1}}
		}
		return nil
	}})
	d.MustRegister(Tool{Name: "exec.x", Risk: guard.Safe, Category: ratelimit.Exec,
		Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	if _, err := d.Dispatch(context.Background(), agent, "exec.x", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dispatch(context.Background(), agent, "exec.x", nil); fault.KindOf(err) != fault.RateLimited {
		t.Fatalf("second call under a burst-1 key rule: %v", err)
	}
	other := auth.Caller{KeyID: "k-other", Role: auth.RoleAgent}
	for range 3 {
		if _, err := d.Dispatch(context.Background(), other, "exec.x", nil); err != nil {
			t.Fatalf("another key under the base rules: %v", err)
		}
	}
}

func TestApprovalOutcomes(t *testing.T) {
	cases := []struct {
		name    string
		answer  error
		ran     bool
		verdict string
		kind    fault.Kind
	}{
		{name: "pending", answer: &ApprovalRequired{ID: "ap_1"}, verdict: "pending"},
		{name: "approved runs once", answer: nil, ran: true, verdict: "approved"},
		{name: "denied by operator", answer: fault.New(fault.Forbidden, "denied"), verdict: "denied", kind: fault.Forbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			au := &memAudit{}
			d := New(Options{Audit: au, Policy: policyFunc(func(Assessment) (Decision, string) { return NeedsApproval, "test" }),
				Approvals: approvalsFunc(func() error { return tc.answer })})
			ran := false
			d.MustRegister(Tool{Name: "exec.x", Risk: guard.Dangerous,
				Run: func(context.Context, auth.Caller, any) (any, error) { ran = true; return nil, nil }})
			_, err := d.Dispatch(context.Background(), agent, "exec.x", nil)
			if ran != tc.ran {
				t.Fatalf("ran = %v, err %v", ran, err)
			}
			var ar *ApprovalRequired
			if tc.verdict == "pending" && (!errors.As(err, &ar) || au.last().Detail["approval_id"] != "ap_1") {
				t.Fatalf("err %v, audit %+v", err, au.last())
			}
			if tc.kind != "" && fault.KindOf(err) != tc.kind {
				t.Fatalf("err %v", err)
			}
			if au.last().Verdict != tc.verdict {
				t.Fatalf("verdict %q, want %q", au.last().Verdict, tc.verdict)
			}
		})
	}
}

func TestObserverSeesEveryCall(t *testing.T) {
	d := New(Options{})
	var seen []string
	d.Observe(func(_ context.Context, _ auth.Caller, name string) { seen = append(seen, name) })
	d.MustRegister(Tool{Name: "a.b", Risk: guard.Safe, Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	_, _ = d.Dispatch(context.Background(), agent, "a.b", nil)
	_, _ = d.Dispatch(context.Background(), agent, "no.such", nil)
	if len(seen) != 2 || seen[0] != "a.b" || seen[1] != "no.such" {
		t.Fatalf("seen %v", seen)
	}
}

func TestFlagged(t *testing.T) {
	cases := []struct {
		name string
		a    Assessment
		want bool
	}{
		{"declared dangerous only", Assessment{Risk: guard.Dangerous}, false},
		{"dangerous rule", Assessment{Risk: guard.Dangerous, Rules: []string{"rm-rf-root"}}, true},
		{"medium rule", Assessment{Risk: guard.Medium, Rules: []string{"inline-program"}}, false},
		{"dynamic", Assessment{Risk: guard.Dangerous, Dynamic: true}, true},
	}
	for _, tc := range cases {
		if got := tc.a.Flagged(); got != tc.want {
			t.Errorf("%s: Flagged = %v", tc.name, got)
		}
	}
}

// Calls made inside a call that runs by an operator's approval need no
// approval of their own (the composite's risk was derived from them); a
// Deny still denies, and another key's calls are not covered.
func TestNestedCallsInsideAnApprovedCall(t *testing.T) {
	outerApproved := true
	d := New(Options{
		Policy: policyFunc(func(a Assessment) (Decision, string) {
			if a.Rules != nil {
				return Deny, "deny rule"
			}
			return NeedsApproval, "test"
		}),
		Approvals: approvalsFunc(func() error {
			if outerApproved {
				outerApproved = false
				return nil
			}
			return &ApprovalRequired{ID: "ap_inner"}
		}),
	})
	ran := 0
	d.MustRegister(Tool{Name: "exec.inner", Risk: guard.Dangerous,
		Run: func(context.Context, auth.Caller, any) (any, error) { ran++; return nil, nil }})
	d.MustRegister(Tool{Name: "exec.denied", Risk: guard.Dangerous,
		Assess: func(any) Assessment { return Assessment{Risk: guard.Dangerous, Rules: []string{"x"}} },
		Run:    func(context.Context, auth.Caller, any) (any, error) { ran++; return nil, nil }})
	var innerErr, deniedErr error
	d.MustRegister(Tool{Name: "custom.outer", Risk: guard.Dangerous,
		Run: func(ctx context.Context, c auth.Caller, _ any) (any, error) {
			_, innerErr = d.Dispatch(ctx, c, "exec.inner", nil)
			_, deniedErr = d.Dispatch(ctx, c, "exec.denied", nil)
			_, err := d.Dispatch(ctx, auth.Caller{KeyID: "k-other", Role: auth.RoleAgent}, "exec.inner", nil)
			var ar *ApprovalRequired
			if !errors.As(err, &ar) {
				t.Errorf("another key inside the approved call: %v", err)
			}
			return nil, nil
		}})
	if _, err := d.Dispatch(context.Background(), agent, "custom.outer", nil); err != nil {
		t.Fatal(err)
	}
	if innerErr != nil || ran != 1 || fault.KindOf(deniedErr) != fault.Forbidden {
		t.Fatalf("inner %v, denied %v, ran %d", innerErr, deniedErr, ran)
	}
	// Outside an approved call the inner tool waits for its own approval.
	if _, err := d.Dispatch(context.Background(), agent, "exec.inner", nil); err == nil {
		t.Fatal("inner ran without approval")
	}
}

// TestKeyOwnRateLimits: the limits an admin set on a key when creating it
// (carried by the Caller) decide for that key, over the policy's overrides,
// and leave other keys alone.
func TestKeyOwnRateLimits(t *testing.T) {
	lim := ratelimit.New(ratelimit.Options{})
	d := New(Options{Limiter: lim, RateRules: func(auth.Caller) ratelimit.Rules {
		// A policy override that would let the key run far more.
		return ratelimit.Rules{ratelimit.Command: {PerMinute: 1000, Burst: 1000}}
	}})
	d.MustRegister(Tool{Name: "exec.run", Risk: guard.Safe, Category: ratelimit.Exec,
		Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	limited := auth.Caller{KeyID: "k-limited", Role: auth.RoleAgent,
		RateLimits: ratelimit.Rules{ratelimit.Command: {PerMinute: 2, Burst: 2}}}
	for i := range 2 {
		if _, err := d.Dispatch(context.Background(), limited, "exec.run", nil); err != nil {
			t.Fatalf("command %d of 2: %v", i+1, err)
		}
	}
	_, err := d.Dispatch(context.Background(), limited, "exec.run", nil)
	var rl *RateLimited
	if fault.KindOf(err) != fault.RateLimited || !errors.As(err, &rl) || rl.Category != ratelimit.Command || rl.Decision.Limit != 2 {
		t.Fatalf("3rd command under command=2/m: %v", err)
	}
	other := auth.Caller{KeyID: "k-other", Role: auth.RoleAgent}
	for range 5 {
		if _, err := d.Dispatch(context.Background(), other, "exec.run", nil); err != nil {
			t.Fatalf("another key: %v", err)
		}
	}
	// Without a policy step the key's limits still hold.
	d2 := New(Options{Limiter: ratelimit.New(ratelimit.Options{})})
	d2.MustRegister(Tool{Name: "exec.run", Risk: guard.Safe, Category: ratelimit.Exec,
		Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	for range 2 {
		_, _ = d2.Dispatch(context.Background(), limited, "exec.run", nil)
	}
	if _, err := d2.Dispatch(context.Background(), limited, "exec.run", nil); fault.KindOf(err) != fault.RateLimited {
		t.Fatalf("3rd command without a policy step: %v", err)
	}
}
