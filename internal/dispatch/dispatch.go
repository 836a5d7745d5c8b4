// Package dispatch is the one chokepoint every capability call passes,
// whether it arrives over the native HTTP API, an AIO-compatible route, MCP
// or a composite custom tool:
//
//	HALT → auth scope → rate limit → risk → policy → run → audit
//
// HALT is deny by default: while halted only the tools of one exempt
// list run (halt.go).
//
// Each capability is a named Tool with an input schema and a declared risk
// tier. Dispatch refuses in that order (a halted server refuses before it
// counts a call against a rate limit; a refused call is not counted), runs
// the tool, and writes one audit record with the verdict, whatever the
// outcome; a call whose record cannot be stored is answered Unavailable,
// never with its result (no answer without its record). Nested calls (custom tools) re-enter Dispatch, so every step
// applies at every level; the nesting depth travels in the context and is
// capped.
//
// What it stops: a route that forgets a check. Routes do not check roles,
// limits or HALT themselves; they call Dispatch. What it does not stop:
// anything the tool's own Run lets through — the sandbox is the boundary.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// MaxDepth is the deepest nesting of tool calls; a call at this depth is
// refused (custom tools: depth >= 8 refused at run time).
const MaxDepth = 8

type depthKey struct{}

// Depth is the nesting depth of the call running in ctx (0 at the top).
func Depth(ctx context.Context) int {
	n, _ := ctx.Value(depthKey{}).(int)
	return n
}

// Call decodes JSON arguments for tool name and dispatches it (MCP,
// /v1/tools/call, custom tool steps).
func (d *Dispatcher) Call(ctx context.Context, c auth.Caller, name string, raw json.RawMessage) (any, error) {
	t, ok := d.Tool(name)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "no tool named %q", name)
	}
	var args any = raw
	if t.Decode != nil {
		var err error
		if args, err = t.Decode(raw); err != nil {
			// Refused like any other call: after HALT and the role,
			// with its audit record.
			args = undecodable{err}
		}
	}
	return d.Dispatch(ctx, c, name, args)
}

// undecodable stands for arguments Call could not decode: Dispatch refuses
// the call with the decoder's error where it checks arguments.
type undecodable struct{ err error }

// Dispatch runs tool name for c with typed args through every step.
func (d *Dispatcher) Dispatch(ctx context.Context, c auth.Caller, name string, args any) (result any, err error) {
	st := d.steps()
	for _, fn := range st.observers {
		fn(ctx, c, name)
	}
	t, ok := d.Tool(name)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "no tool named %q", name)
	}
	depth := Depth(ctx)
	_, bad := args.(undecodable)
	a := Assessment{Risk: t.Risk}
	var tgt Target
	if !bad { // a tool's hooks see only its own arguments
		a = t.AssessArgs(args)
		if t.Describe != nil {
			tgt = t.Describe(args)
		}
	}
	verdict := "allowed"
	var reason string
	var closeWindow func()
	// first is the call's record when it went before Run (record.go).
	var first Durable
	defer func() {
		if closeWindow != nil {
			// Before the record: its commit is the sync the run's
			// deferred writes wait for (Options.FlushWindow).
			closeWindow()
		}
		if err != nil && (verdict == "allowed" || verdict == "approved") {
			verdict = "error"
		}
		if first != nil {
			// The call's record went first; the answer still waits for
			// it (a command held for it has waited already), and the
			// outcome rides the next commit.
			seq, aerr := first.Wait()
			if aerr == nil {
				var sum map[string]any
				if err == nil && t.Summarize != nil {
					sum = t.Summarize(args, result)
				}
				aerr = d.outcome(ctx, c, t, Target{Target: tgt.Target, Sandbox: tgt.Sandbox, Detail: sum}, seq, verdict, reason, err)
			}
			if aerr != nil {
				// Whatever the run said: a command held for its record
				// was refused when the record failed.
				result = nil
				err = fault.Wrap(fault.Unavailable, aerr, "the call's audit record could not be stored, so its result is withheld; the server's log says why")
			}
			return
		}
		if err == nil && t.Summarize != nil {
			tgt.Detail = merge(tgt.Detail, t.Summarize(args, result))
		}
		if aerr := d.record(ctx, c, t, a, tgt, depth, verdict, reason, err); aerr != nil && err == nil {
			// No answer without its record: the call may have run, but
			// its result is withheld rather than given unrecorded.
			result = nil
			err = fault.Wrap(fault.Unavailable, aerr, "the call's audit record could not be stored, so its result is withheld; the server's log says why")
		}
	}()

	// 1. HALT: deny by default. Every call is refused, at every nesting
	// level, unless its tool is on the exempt list (halt.go) and the call
	// is Safe.
	if err := st.haltRefusal(t, a); err != nil {
		verdict, reason = "denied", "halted"
		return nil, err
	}
	if depth >= MaxDepth {
		verdict, reason = "denied", "depth"
		return nil, fault.Errorf(fault.Invalid, "tool calls nested %d deep; the limit is %d", depth, MaxDepth-1)
	}
	// 2. Scope: who may call this tool at all.
	roles := t.Roles
	if len(roles) == 0 {
		roles = []auth.Role{auth.RoleAdmin, auth.RoleAgent}
	}
	if t.Visible != nil && !t.Visible(c) {
		verdict, reason = "denied", "not_visible"
		return nil, fault.Errorf(fault.NotFound, "no tool named %q", name)
	}
	if !slices.Contains(roles, c.Role) {
		verdict, reason = "denied", "role"
		return nil, fault.Errorf(fault.Forbidden, "the %s role may not call %s", c.Role, t.Name)
	}
	// Arguments that break their type's rules are refused before they
	// count against a limit.
	if u, ok := args.(undecodable); ok {
		reason = "invalid"
		return nil, argsRefusal{tool: t.Name, err: u.err}
	}
	if t.Check != nil {
		if err := t.Check(args); err != nil {
			reason = "invalid"
			return nil, argsRefusal{tool: t.Name, err: err}
		}
	}
	// 3. Rate limit (a refused call is not counted).
	if cat := ratelimit.ForTool(t.Name, t.Category); d.limiter != nil && cat != 0 {
		var dec ratelimit.Decision
		if rule, ok := d.overridden(st, c, cat); ok {
			dec = d.limiter.AllowRule(c.KeyID, cat, rule)
		} else {
			dec = d.limiter.Allow(c.KeyID, cat)
		}
		if !dec.Allowed {
			verdict, reason = "denied", "rate_limit"
			rl := &RateLimited{Category: cat, Decision: dec}
			return nil, &fault.Error{Kind: fault.RateLimited, Msg: rl.Error(), RetryAfter: dec.RetryAfterSeconds(), Err: rl}
		}
	}
	// 4–5. Risk is assessed above; the policy decides on it.
	decision, why := Allow, ""
	if st.policy != nil {
		decision, why = st.policy.Decide(ctx, c, t, a, args)
	}
	switch decision {
	case Deny:
		verdict, reason = "denied", why
		return nil, fault.Errorf(fault.Forbidden, "policy refuses %s at risk %s: %s", t.Name, a.Risk, why)
	case NeedsApproval:
		verdict, reason = "pending", why
		if inApproved(ctx, c, a) {
			// A composite call an operator approved: its risk, shown to
			// the operator, was derived from the calls it makes (custom
			// tools flag arguments built at run time), so those calls
			// need no approval of their own — as long as what this one
			// is flagged for is what the operator saw. A Deny still
			// denies.
			verdict, reason = "approved", "inside an approved call"
			break
		}
		if st.approvals == nil {
			verdict = "denied"
			return nil, fault.Errorf(fault.Forbidden, "%s at risk %s needs an operator's approval, and approvals are not enabled", t.Name, a.Risk)
		}
		shown := a
		if why != "" {
			shown.Reasons = append(slices.Clip(a.Reasons), "policy: "+why)
		}
		waitCtx, release := d.holdWait(ctx, st, c)
		err := st.approvals.Request(waitCtx, c, t, shown, args)
		release()
		if err != nil {
			var ar *ApprovalRequired
			if !errors.As(err, &ar) {
				verdict = "denied"
			} else {
				tgt.Detail = merge(tgt.Detail, map[string]any{"approval_id": ar.ID})
			}
			return nil, err
		}
		// An operator approved this identical call; it runs once — if
		// what was approved is still what would run.
		if err := d.stillApproved(t, a, args); err != nil {
			verdict, reason = "denied", "redefined"
			return nil, err
		}
		verdict = "approved"
		ctx = withApproved(ctx, c, shown)
	}
	// HALT again: the approval (or the policy's look-ups) may have kept
	// the call waiting while an operator halted the server.
	if err := st.haltRefusal(t, a); err != nil {
		verdict, reason = "denied", "halted"
		return nil, err
	}
	// 6. Run. A call that starts a command has its record go first.
	switch {
	case t.Commands != NoCommand && d.audit != nil:
		rec, berr := d.begin(ctx, callEntry(c, t, a, tgt, depth, verdict, reason, nil))
		if berr != nil {
			verdict = "error"
			return nil, fault.Wrap(fault.Unavailable, berr, "the call's audit record could not be stored, so it did not run; the server's log says why")
		}
		first = rec
		if t.Commands == RecordFirst {
			if _, werr := rec.Wait(); werr != nil {
				return nil, fault.Wrap(fault.Unavailable, werr, "the call's audit record could not be stored, so it did not run; the server's log says why")
			}
			ctx = noHeldRecord(ctx)
		} else {
			ctx = context.WithValue(ctx, heldKey{}, rec)
		}
	case d.flushWindow != nil && d.audit != nil:
		ctx, closeWindow = d.flushWindow(ctx)
		ctx = noHeldRecord(ctx)
	default:
		ctx = noHeldRecord(ctx)
	}
	ctx = context.WithValue(ctx, withinKey{}, within{d: d, c: c})
	return t.Run(context.WithValue(ctx, depthKey{}, depth+1), c, args)
}

// record appends the call's audit record and returns the append's error.
func (d *Dispatcher) record(ctx context.Context, c auth.Caller, t *Tool, a Assessment, tgt Target, depth int, verdict, reason string, err error) error {
	if d.audit == nil {
		return nil
	}
	e := callEntry(c, t, a, tgt, depth, verdict, reason, err)
	if w, ok := d.audit.(auditWriter); ok {
		return w.Write(context.WithoutCancel(ctx), e)
	}
	_, aerr := d.audit.Append(context.WithoutCancel(ctx), e)
	return aerr
}

// callEntry is the record of a call.
func callEntry(c auth.Caller, t *Tool, a Assessment, tgt Target, depth int, verdict, reason string, err error) audit.Entry {
	detail := merge(map[string]any{"risk": a.Risk.String()}, tgt.Detail)
	if len(a.Rules) > 0 {
		detail["rules"] = a.Rules
	}
	if a.Dynamic {
		detail["dynamic"] = true
	}
	if a.Guard != nil {
		detail["guard"] = a.Guard.Label()
	}
	if depth > 0 {
		detail["depth"] = depth
	}
	if reason != "" {
		detail["reason"] = reason
	}
	if err != nil {
		detail["error"] = errorDetail(err)
	}
	return audit.Entry{
		Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
		Action: t.Name, Target: tgt.Target, Sandbox: tgt.Sandbox,
		Verdict: verdict, Detail: detail,
	}
}

// errorDetail is what a record says of a call's error.
func errorDetail(err error) string {
	var rl *RateLimited
	var ar *ApprovalRequired
	switch {
	case errors.As(err, &rl):
		return rl.Error()
	case errors.As(err, &ar):
		return "waiting for an operator's approval (" + ar.ID + ")"
	}
	return fault.Public(err)
}

// auditWriter is an audit log that stores a record without handing it
// back (audit.Log's Write): the dispatcher never reads its records back,
// so it skips decoding each one's detail again.
type auditWriter interface {
	Write(ctx context.Context, e audit.Entry) error
}

var _ auditWriter = (*audit.Log)(nil)

func merge(a, b map[string]any) map[string]any {
	if a == nil {
		a = make(map[string]any, len(b))
	}
	for k, v := range b {
		a[k] = v
	}
	return a
}

type approvalWaitKey struct{}

// WithApprovalWait asks that a call needing approval wait up to d for the
// operator's decision before answering "pending" (the HTTP layer sets it
// from the request; the approvals service bounds it).
func WithApprovalWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, approvalWaitKey{}, d)
}

// ApprovalWait is the wait set by WithApprovalWait (0: do not wait).
func ApprovalWait(ctx context.Context) time.Duration {
	d, _ := ctx.Value(approvalWaitKey{}).(time.Duration)
	return max(d, 0)
}
