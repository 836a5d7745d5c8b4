package sandbox

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// The two acts a call makes on its caller's behalf without naming them:
// the first call at /v1/... creates the caller's default sandbox, and the
// first use of a stopped sandbox starts it. Each is a tool of its own,
// dispatched from inside the call that needs it (dispatch.Within), so
// HALT refuses it, the policy can deny it by name (sandbox.* denies both),
// it counts against the manage limit (and creation against the key's
// sandboxes cap) and the audit holds a record of it. Outside a dispatched
// call neither happens.
var (
	ToolCreateDefault = dispatch.Ref[NoArgs, Info]("sandbox.create_default")
	ToolStart         = dispatch.Ref[IDArgs, Info]("sandbox.start")
)

// Refusals of an implicit act asked for outside a dispatched call (a
// server-side path with no caller to act for).
var (
	errNoDefault = fault.New(fault.NotFound, "no default sandbox; name one with /sandboxes/{id}/...")
	errStopped   = fault.New(fault.Conflict, "sandbox is stopped")
)

// resolveDefault is c's default sandbox, created by a dispatched
// sandbox.create_default when c has none.
func (m *Manager) resolveDefault(ctx context.Context, c auth.Caller) (*Sandbox, error) {
	if s := m.defaultOf(c.KeyID); s != nil {
		return s, nil
	}
	d, _, ok := dispatch.Within(ctx)
	if !ok {
		return nil, errNoDefault
	}
	info, err := ToolCreateDefault.Call(ctx, d, c, NoArgs{})
	if err != nil {
		return nil, err
	}
	return m.Get(Caller{KeyID: c.KeyID}, info.ID)
}

// startImplicitly starts the stopped sandbox s by a dispatched
// sandbox.start for the caller of the call ctx belongs to.
func (m *Manager) startImplicitly(ctx context.Context, s *Sandbox) error {
	_, err := ToolStart.CallWithin(ctx, IDArgs{ID: s.rec.ID}, errStopped)
	return err
}

// ImplicitTools are the tools the manager dispatches on a caller's behalf
// (sandbox.create_default, sandbox.start, sandbox.adopt); they live here,
// beside what they run, which nothing else may call.
func ImplicitTools(m *Manager) []dispatch.Tool {
	return []dispatch.Tool{createDefaultTool(m), startTool(m), adoptTool(m)}
}

func createDefaultTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolCreateDefault, dispatch.Spec{Risk: guard.Medium,
		Description: "Create the caller's default sandbox (what /v1/... routes act on) if it has none; the first call that needs it does this on its own"},
		func(ctx context.Context, c auth.Caller, _ NoArgs) (Info, error) {
			s, err := m.createDefault(ctx, Caller{KeyID: c.KeyID})
			if err != nil {
				return Info{}, err
			}
			return s.Info(), nil
		}, dispatch.Hooks[NoArgs, Info]{
			Summarize: func(_ NoArgs, in Info) map[string]any { return map[string]any{"sandbox": in.ID} },
		})
}

func startTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolStart, dispatch.Spec{Risk: guard.Medium,
		Description: "Start a stopped sandbox (stopped when idle, or by a restart of the server); the first call that uses it does this on its own"},
		func(ctx context.Context, c auth.Caller, a IDArgs) (Info, error) {
			s, err := m.Get(Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, a.ID)
			if err != nil {
				return Info{}, err
			}
			if err := s.startIfStopped(ctx); err != nil {
				return Info{}, err
			}
			return s.Info(), nil
		}, dispatch.Hooks[IDArgs, Info]{Describe: func(a IDArgs) dispatch.Target { return dispatch.Target{Sandbox: a.ID} }})
}
