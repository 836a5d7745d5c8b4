package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

type memAudit struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (m *memAudit) Append(_ context.Context, e audit.Entry) (audit.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = append(m.entries, e)
	return audit.Record{}, nil
}

func (m *memAudit) last() audit.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries[len(m.entries)-1]
}

type halt struct{ on bool }

func (h *halt) Halted() (bool, string) { return h.on, "test" }

type policyFunc func(a Assessment) (Decision, string)

func (f policyFunc) Decide(_ context.Context, _ auth.Caller, _ *Tool, a Assessment, _ any) (Decision, string) {
	return f(a)
}

var (
	agent  = auth.Caller{KeyID: "k-agent", Role: auth.RoleAgent}
	viewer = auth.Caller{KeyID: "k-viewer", Role: auth.RoleViewer}
)

func TestDispatchOrder(t *testing.T) {
	ran := 0
	run := func(context.Context, auth.Caller, any) (any, error) { ran++; return "ok", nil }
	cases := []struct {
		name    string
		halted  bool
		caller  auth.Caller
		risk    guard.Risk
		policy  Decision
		burst   int
		want    fault.Kind
		verdict string
		reason  string
	}{
		{name: "allowed", caller: agent, risk: guard.Medium, burst: 5, verdict: "allowed"},
		{name: "halt refuses non-safe", halted: true, caller: agent, risk: guard.Medium, burst: 5, want: fault.Conflict, verdict: "denied", reason: "halted"},
		{name: "halt refuses a safe-looking command too", halted: true, caller: agent, risk: guard.Safe, burst: 5, want: fault.Conflict, verdict: "denied", reason: "halted"},
		{name: "halt comes before scope", halted: true, caller: viewer, risk: guard.Dangerous, burst: 5, want: fault.Conflict, reason: "halted", verdict: "denied"},
		{name: "scope before rate limit", caller: viewer, risk: guard.Medium, burst: 0, want: fault.Forbidden, reason: "role", verdict: "denied"},
		{name: "rate limit before policy", caller: agent, risk: guard.Medium, policy: Deny, burst: 0, reason: "rate_limit", verdict: "denied"},
		{name: "policy denies", caller: agent, risk: guard.Dangerous, policy: Deny, burst: 5, want: fault.Forbidden, verdict: "denied"},
		{name: "needs approval without approvals is refused", caller: agent, risk: guard.Dangerous, policy: NeedsApproval, burst: 5, want: fault.Forbidden, verdict: "denied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ran = 0
			au := &memAudit{}
			rules := ratelimit.DefaultRules()
			rules[ratelimit.Exec] = ratelimit.Rule{PerMinute: 1, Burst: tc.burst}
			lim := ratelimit.New(ratelimit.Options{Rules: rules})
			if tc.burst == 0 {
				// An exhausted bucket: burst 1 used up.
				rules[ratelimit.Exec] = ratelimit.Rule{PerMinute: 0.001, Burst: 1}
				lim = ratelimit.New(ratelimit.Options{Rules: rules})
				lim.Allow(tc.caller.KeyID, ratelimit.Exec)
			}
			d := New(Options{Limiter: lim, Audit: au, Halt: &halt{on: tc.halted},
				Policy: policyFunc(func(Assessment) (Decision, string) { return tc.policy, "test policy" })})
			d.MustRegister(Tool{Name: "exec.test", Risk: tc.risk, Category: ratelimit.Exec, Run: run})
			_, err := d.Dispatch(context.Background(), tc.caller, "exec.test", nil)
			switch {
			case tc.reason == "rate_limit":
				var rl *RateLimited
				if !errors.As(err, &rl) || rl.Decision.RetryAfter <= 0 || fault.KindOf(err) != fault.RateLimited {
					t.Fatalf("err = %v, want rate limited with Retry-After", err)
				}
			case tc.want == "":
				if err != nil || ran != 1 {
					t.Fatalf("err = %v, ran %d", err, ran)
				}
			default:
				if fault.KindOf(err) != tc.want || ran != 0 {
					t.Fatalf("err = %v (ran %d), want %s", err, ran, tc.want)
				}
			}
			e := au.last()
			if e.Action != "exec.test" || e.Verdict != tc.verdict || (tc.reason != "" && e.Detail["reason"] != tc.reason) {
				t.Fatalf("audit = %+v, want verdict %s reason %q", e, tc.verdict, tc.reason)
			}
		})
	}
}

func TestRefusedCallsAreNotCounted(t *testing.T) {
	rules := ratelimit.DefaultRules()
	rules[ratelimit.Exec] = ratelimit.Rule{PerMinute: 0.001, Burst: 1}
	lim := ratelimit.New(ratelimit.Options{Rules: rules})
	h := &halt{on: true}
	d := New(Options{Limiter: lim, Halt: h})
	d.MustRegister(Tool{Name: "exec.x", Risk: guard.Dangerous, Category: ratelimit.Exec,
		Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	for range 5 {
		if _, err := d.Dispatch(context.Background(), agent, "exec.x", nil); fault.KindOf(err) != fault.Conflict {
			t.Fatalf("halted call: %v", err)
		}
	}
	h.on = false
	if _, err := d.Dispatch(context.Background(), agent, "exec.x", nil); err != nil {
		t.Fatalf("first call after unhalt was refused: %v (refusals were counted)", err)
	}
}

func TestAssessRaisesRiskAndNestingIsCapped(t *testing.T) {
	au := &memAudit{}
	var seen guard.Risk
	d := New(Options{Audit: au, Policy: policyFunc(func(a Assessment) (Decision, string) { seen = a.Risk; return Allow, "" })})
	d.MustRegister(Tool{Name: "exec.cmd", Risk: guard.Safe,
		Decode: func(raw json.RawMessage) (any, error) { var s string; err := json.Unmarshal(raw, &s); return s, err },
		Assess: func(args any) Assessment {
			if args.(string) == "rm -rf /" {
				return Assessment{Risk: guard.Dangerous, Rules: []string{"rm-rf-root"}}
			}
			return Assessment{Risk: guard.Safe}
		},
		Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	if _, err := d.Call(context.Background(), agent, "exec.cmd", json.RawMessage(`"rm -rf /"`)); err != nil {
		t.Fatal(err)
	}
	if seen != guard.Dangerous || au.last().Detail["risk"] != "dangerous" {
		t.Fatalf("risk seen %v, audit %+v", seen, au.last())
	}
	self := func(ctx context.Context, c auth.Caller, args any) (any, error) {
		return d.Dispatch(ctx, c, "custom.loop", nil)
	}
	d.MustRegister(Tool{Name: "custom.loop", Risk: guard.Safe, Run: self})
	_, err := d.Dispatch(context.Background(), agent, "custom.loop", nil)
	if fault.KindOf(err) != fault.Invalid {
		t.Fatalf("unbounded nesting: %v", err)
	}
	found := false
	for _, e := range au.entries {
		if e.Detail["depth"] == MaxDepth && e.Verdict == "denied" && e.Detail["reason"] == "depth" {
			found = true
		}
	}
	if !found || len(au.entries) != MaxDepth+2 {
		t.Fatalf("want every level audited and the refusal at depth %d; got %d records", MaxDepth, len(au.entries))
	}
}

func TestRegisterRefusesBadTools(t *testing.T) {
	d := New(Options{})
	run := func(context.Context, auth.Caller, any) (any, error) { return nil, nil }
	for _, tl := range []Tool{
		{Name: "Bad Name", Run: run},
		{Name: "no.run", Risk: guard.Safe},
		{Name: "risk.unset", Run: run},
		{Name: "risk.bad", Risk: guard.Risk(9), Run: run},
	} {
		if err := d.Register(tl); err == nil {
			t.Fatalf("registered %+v", tl.Name)
		}
	}
	d.MustRegister(Tool{Name: "dup.x", Risk: guard.Safe, Run: run})
	if err := d.Register(Tool{Name: "dup.x", Risk: guard.Safe, Run: run}); err == nil {
		t.Fatal("registered a name twice")
	}
}

// failingAudit is an audit log whose store refuses every record.
type failingAudit struct{ calls int }

func (f *failingAudit) Append(context.Context, audit.Entry) (audit.Record, error) {
	f.calls++
	return audit.Record{}, errors.New("disk full")
}

// A call whose audit record cannot be stored is not answered with its
// result: the answer is Unavailable, never a success without a record.
func TestNoResultWithoutItsAuditRecord(t *testing.T) {
	au := &failingAudit{}
	ran := 0
	d := New(Options{Audit: au})
	d.MustRegister(Tool{Name: "plain.echo", Risk: guard.Safe,
		Run: func(context.Context, auth.Caller, any) (any, error) { ran++; return "secret result", nil }})
	res, err := d.Dispatch(context.Background(), auth.Caller{KeyID: "k", Role: auth.RoleAgent}, "plain.echo", nil)
	if ran != 1 || au.calls != 1 {
		t.Fatalf("ran %d, audit appends %d; want 1 and 1", ran, au.calls)
	}
	if res != nil {
		t.Fatalf("result %v given without its audit record", res)
	}
	if fault.KindOf(err) != fault.Unavailable || strings.Contains(fault.Public(err), "disk full") {
		t.Fatalf("err = %v (kind %s); want Unavailable without the store's cause", err, fault.KindOf(err))
	}
	// A refusal stays the refusal it was.
	_, err = d.Dispatch(context.Background(), auth.Caller{KeyID: "k", Role: auth.RoleAgent}, "no.such", nil)
	if fault.KindOf(err) != fault.NotFound {
		t.Fatalf("unknown tool: %v", err)
	}
}
