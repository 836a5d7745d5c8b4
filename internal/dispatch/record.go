package dispatch

import (
	"context"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
)

// Record first.
//
// A call is answered only once its audit record is durable. A call that
// starts a command (a command line, code, a line typed into a shell) must
// also never start it before its record is durable: a crash during the
// command must not leave it unrecorded. Such a tool declares Commands, and
// its calls leave two records:
//
//   - the call's record (action: the tool's name; verdict allowed or
//     approved; risk, guard, rules, target), appended before Run and
//     durable before the command starts. It is the one record of the call,
//     as every other call has one: a query by the tool's name finds one
//     record per call.
//   - its outcome (action: the tool's name + OutcomeSuffix; verdict as the
//     call's one record used to end: allowed, approved or error; the
//     tool's summary, the error; call_seq names the call's record),
//     posted after Run: it rides the next commit (audit.Log.Post), so the
//     answer does not wait for a sync of its own. A crash can lose the
//     outcomes of the last moment (audit.DefaultPostedDelay), never a call
//     record: SECURITY.md, "Audit".
//
// With RecordFirst the dispatcher waits for the call's record before Run.
// With HeldCommand it does not: Run passes the record on (HeldRecord) to
// the sandbox, whose init prepares the command, holds it before its fork,
// and starts it once the record is durable (sandbox.Exec, agent.Hold), so
// the sync runs beside the command's start instead of before it or after
// its end. Either way the answer waits for the call's record.
//
// A call refused before Run (HALT, role, rate limit, policy, approval)
// starts nothing and keeps one record, stored after the refusal.

// Commands says whether and how a tool's calls start a command.
type Commands uint8

// The ways a tool's calls start commands.
const (
	// NoCommand: the call's one record is stored after Run.
	NoCommand Commands = iota
	// RecordFirst: the call's record is durable before Run starts.
	RecordFirst
	// HeldCommand: Run starts the command only through a sandbox that
	// holds it until the record (HeldRecord) is durable.
	HeldCommand
)

// OutcomeSuffix is added to a tool's name to name its calls' outcome
// records.
const OutcomeSuffix = ".outcome"

// Durable is a call's record on its way to the store.
type Durable interface {
	// OnDurable has f called once the record is durable (nil) or could not
	// be stored; f must not block.
	OnDurable(f func(error))
	// Wait returns the record's seq once it is durable, or why it is not.
	Wait() (int64, error)
}

var _ Durable = (*audit.Pending)(nil)

type heldKey struct{}

// HeldRecord is the call's record a command started in ctx must wait for
// (a HeldCommand tool's run), nil if none.
func HeldRecord(ctx context.Context) Durable {
	d, _ := ctx.Value(heldKey{}).(Durable)
	return d
}

// recordFirst is an audit log that can begin a record without waiting for
// its commit and post one that rides the next (audit.Log).
type recordFirst interface {
	Begin(ctx context.Context, e audit.Entry) (*audit.Pending, error)
	Post(ctx context.Context, e audit.Entry) error
}

var _ recordFirst = (*audit.Log)(nil)

// stored is a record appended the ordinary way, for an audit log that cannot
// begin one (tests' appenders): already durable, or failed.
type stored struct {
	seq int64
	err error
}

func (s stored) OnDurable(f func(error)) { f(s.err) }
func (s stored) Wait() (int64, error)    { return s.seq, s.err }

// begin appends the call's record before Run.
func (d *Dispatcher) begin(ctx context.Context, e audit.Entry) (Durable, error) {
	ctx = context.WithoutCancel(ctx)
	if rf, ok := d.audit.(recordFirst); ok {
		p, err := rf.Begin(ctx, e)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	r, err := d.audit.Append(ctx, e)
	return stored{seq: r.Seq, err: err}, nil
}

// outcome stores the outcome record of a call whose record went first.
func (d *Dispatcher) outcome(ctx context.Context, c auth.Caller, t *Tool, tgt Target, seq int64, verdict, reason string, err error) error {
	detail := merge(map[string]any{"call_seq": seq}, tgt.Detail)
	if reason != "" {
		detail["reason"] = reason
	}
	if err != nil {
		detail["error"] = errorDetail(err)
	}
	e := audit.Entry{
		Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
		Action: t.Name + OutcomeSuffix, Target: tgt.Target, Sandbox: tgt.Sandbox,
		Verdict: verdict, Detail: detail,
	}
	ctx = context.WithoutCancel(ctx)
	if rf, ok := d.audit.(recordFirst); ok {
		return rf.Post(ctx, e)
	}
	_, aerr := d.audit.Append(ctx, e)
	return aerr
}

// noHeldRecord keeps a nested call from holding its commands for the
// record of the call it runs in: a nested command tool holds them for its
// own.
func noHeldRecord(ctx context.Context) context.Context {
	if ctx.Value(heldKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, heldKey{}, nil)
}
