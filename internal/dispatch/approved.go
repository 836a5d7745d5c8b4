package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// PlannedStep is one call a composite tool will make, as the operator who
// approves it sees it: the tool, what it touches (the rendered command
// line for exec, a path for a file tool) and its rendered arguments.
type PlannedStep struct {
	// Depth is 0 for the tool's own steps, 1 for the steps of a custom
	// tool it calls, and so on.
	Depth  int    `json:"depth,omitempty"`
	ID     string `json:"id,omitempty"`
	Tool   string `json:"tool"`
	Target string `json:"target,omitempty" doc:"what the step touches: the rendered command line for exec, a path for a file tool"`
	// Arguments are the rendered arguments (capped; see Truncated).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	// Late marks a step whose arguments are built at run time from
	// earlier steps' results: nobody can see them before it runs.
	Late bool `json:"late,omitempty"`
}

// ErrHalted is the cause of every HALT refusal (errors.Is): an edge that
// answers a tool's own Conflict as the tool's failure (AIO's 200 with
// success:false) tells the operator's refusal from it by this.
var ErrHalted = errors.New("halted")

// haltRefusal is the HALT step: the error a halted server answers t's call
// with, or nil. Dispatch asks it first and again after every wait, right
// before the tool runs.
func (st steps) haltRefusal(t *Tool, a Assessment) error {
	if st.halt == nil {
		return nil
	}
	if halted, why := st.halt.Halted(); halted && !runsWhileHalted(t, a) {
		return fault.Wrap(fault.Conflict, ErrHalted, fmt.Sprintf("the server is halted by its operator (%s); only control and read-only views run", why))
	}
	return nil
}

// overridden is c's rule for cat when the policy or the key itself
// overrides the limiter's base rules (ok false: the base rule applies).
// The key's own limits (set by an admin when it was created) are the most
// specific rule: over the policy's role and key overrides, over the
// server's.
func (d *Dispatcher) overridden(st steps, c auth.Caller, cat ratelimit.Category) (ratelimit.Rule, bool) {
	if st.rates == nil && len(c.RateLimits) == 0 {
		return ratelimit.Rule{}, false
	}
	var over ratelimit.Rules
	if st.rates != nil {
		over = st.rates(c)
	}
	return d.limiter.Resolve(string(c.Role), over.Merge(c.RateLimits))[cat], true
}

// holdWait takes one of c's approval-wait slots (ratelimit.Approvals) for
// a call that asked to wait for the operator's decision: each waiting call
// holds a connection and a goroutine, identical calls sharing one pending
// approval included. With every slot taken the call does not wait: it is
// answered "pending" at once (the caller polls the approval). release
// gives the slot back.
func (d *Dispatcher) holdWait(ctx context.Context, st steps, c auth.Caller) (_ context.Context, release func()) {
	if d.limiter == nil || ApprovalWait(ctx) == 0 {
		return ctx, func() {}
	}
	var dec ratelimit.Decision
	if rule, ok := d.overridden(st, c, ratelimit.Approvals); ok {
		release, dec = d.limiter.AcquireRule(c.KeyID, ratelimit.Approvals, rule)
	} else {
		release, dec = d.limiter.Acquire(c.KeyID, ratelimit.Approvals)
	}
	if !dec.Allowed {
		return WithApprovalWait(ctx, 0), func() {}
	}
	return ctx, release
}

// stillApproved checks, once an operator's approval let a call through,
// that the tool would still run what was approved: a custom tool
// redefined while the call waited (or between approval and re-send) has
// another digest, and its approval is void.
func (d *Dispatcher) stillApproved(t *Tool, a Assessment, args any) error {
	cur, ok := d.Tool(t.Name)
	if !ok {
		return fault.Errorf(fault.NotFound, "no tool named %q", t.Name)
	}
	if a.Digest == "" && cur == t {
		return nil
	}
	if now := cur.AssessArgs(args); now.Digest != a.Digest {
		return fault.Errorf(fault.Conflict, "%s was redefined after this call was approved, so the approval is void; call again to ask for a new one", t.Name)
	}
	return nil
}

// approvedKey marks the context of a call that runs by an operator's
// approval; its value is an approvedScope.
type approvedKey struct{}

// approvedScope is what the operator saw when approving a call: the key
// that made it and its assessment (the rules, names and paths found in it
// and the calls it makes).
type approvedScope struct {
	key  string
	seen Assessment
}

func withApproved(ctx context.Context, c auth.Caller, seen Assessment) context.Context {
	return context.WithValue(ctx, approvedKey{}, approvedScope{key: c.KeyID, seen: seen})
}

// inApproved reports whether a nested call that needs approval is covered
// by the approved call it runs in: the same key, and nothing the operator
// did not see — no rule, command name or path beyond the approved call's,
// not dynamic unless that was, not riskier. A step whose arguments are
// built at run time can name anything; when it reaches something the
// operator was not shown, it needs an approval of its own.
func inApproved(ctx context.Context, c auth.Caller, a Assessment) bool {
	sc, ok := ctx.Value(approvedKey{}).(approvedScope)
	if !ok || sc.key != c.KeyID {
		return false
	}
	seen := sc.seen
	return a.Risk <= seen.Risk && (!a.Dynamic || seen.Dynamic) &&
		subset(a.Rules, seen.Rules) && subset(a.Names, seen.Names) && subset(a.Paths, seen.Paths) && subset(a.Trees, seen.Trees)
}

func subset(a, b []string) bool {
	for _, v := range a {
		if !slices.Contains(b, v) {
			return false
		}
	}
	return true
}
