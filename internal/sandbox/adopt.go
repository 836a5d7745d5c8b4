package sandbox

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox/orphan"
)

// Taking over a dead node's hibernated sandbox (takeover.go) is an act on
// the sandbox, done for a caller: a tool of its own, sandbox.adopt,
// dispatched from inside the authenticated call that needs the sandbox,
// as sandbox.start is (implicit.go). So HALT refuses it, the role and the
// policy decide on it (sandbox.* denies it), it counts against the
// manage limit, only the sandbox's owner (or an admin) moves it, and the
// audit holds it under the caller's key. The cluster's forwarder only
// routes: a request for a sandbox whose node is dead is served here with
// a mark on its context (orphan.With), and nothing moves until a call of
// that request — authenticated, past the dispatcher's steps — looks the
// sandbox up.

// ToolAdopt takes a hibernated sandbox over from its dead node.
var ToolAdopt = dispatch.Ref[IDArgs, Adoption]("sandbox.adopt")

// errNotRouted refuses sandbox.adopt outside a request the forwarder
// served here for a dead node's sandbox (the same answer for every id).
var errNotRouted = fault.New(fault.Conflict, "a sandbox is taken over only by a call for it that reaches this node while its own node is dead")

// Lookup is Get for the tool call running in ctx: a sandbox this node
// does not hold, addressed by a request the forwarder served here because
// its node is dead, is first taken over by a dispatched sandbox.adopt for
// the call's caller. Anything else is Get's answer.
func (m *Manager) Lookup(ctx context.Context, c Caller, id string) (*Sandbox, error) {
	return m.getOrAdopt(ctx, c, id, func(refused error) error {
		_, err := ToolAdopt.CallWithin(ctx, IDArgs{ID: id}, refused)
		return err
	})
}

// Addressed checks, for an authenticated request at an edge that refuses
// a URL's sandbox before any tool runs (an AIO row at /sandboxes/{id}/…,
// MCP at /sandboxes/{id}/mcp), that c may use sandbox id: Get, after a
// sandbox the forwarder found on a dead node has been taken over by
// sandbox.adopt, dispatched through d for c as a call of its own.
func (m *Manager) Addressed(ctx context.Context, d *dispatch.Dispatcher, c auth.Caller, id string) error {
	_, err := m.getOrAdopt(ctx, CallerOf(c), id, func(error) error {
		_, err := ToolAdopt.Call(ctx, d, c, IDArgs{ID: id})
		return err
	})
	return err
}

// getOrAdopt is Get, or — when it misses a sandbox ctx's request found on
// a dead node — adopt's dispatched take-over, then Get again; a sandbox
// lost with its node is the owner's to know (orphan.Resolve).
func (m *Manager) getOrAdopt(ctx context.Context, c Caller, id string, adopt func(refused error) error) (*Sandbox, error) {
	return orphan.Resolve(ctx, id, c.KeyID, c.Admin, func() (*Sandbox, error) { return m.Get(c, id) }, adopt)
}

// Adoption is sandbox.adopt's answer: the sandbox, this node's now, and
// the dead node it came from.
type Adoption struct {
	Info
	From string `json:"from"`
	// parked is the snapshot its image is parked under (for the audit).
	parked string
}

func adoptTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolAdopt, dispatch.Spec{Risk: guard.Medium, Category: ratelimit.Manage,
		Description: "Take over a hibernated sandbox whose cluster node is dead, so that it resumes on this node; the first call for it that reaches this node does this on its own"},
		func(ctx context.Context, c auth.Caller, a IDArgs) (Adoption, error) {
			from, ok := orphan.Of(ctx, a.ID)
			if !ok {
				return Adoption{}, errNotRouted
			}
			return m.adoptHibernated(ctx, Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, a.ID, from)
		}, dispatch.Hooks[IDArgs, Adoption]{
			Describe: func(a IDArgs) dispatch.Target { return dispatch.Target{Sandbox: a.ID} },
			Summarize: func(_ IDArgs, r Adoption) map[string]any {
				if r.parked == "" {
					return map[string]any{"from": r.From, "moved": false} // an earlier call moved it
				}
				return map[string]any{"from": r.From, "snapshot": r.parked}
			},
		})
}
