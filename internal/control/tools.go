package control

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names.
var (
	ToolGet    = dispatch.Ref[struct{}, State]("control.get")
	ToolHalt   = dispatch.Ref[HaltArgs, State]("control.halt")
	ToolUnhalt = dispatch.Ref[struct{}, State]("control.unhalt")
)

// HaltArgs are control.halt's arguments. Halt cuts a longer reason to
// maxReason.
type HaltArgs struct {
	Reason string `json:"reason,omitempty" maxLength:"512" doc:"shown in every refusal while halted"`
}

// Tools are control.get (every role) and control.halt / control.unhalt
// (admin only). All are Safe: they must work while halted.
func Tools(c *Control) []dispatch.Tool {
	admin := []auth.Role{auth.RoleAdmin}
	return []dispatch.Tool{
		dispatch.Define(ToolGet, dispatch.Spec{Description: "Read whether the server is halted", Risk: guard.Safe,
			Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}},
			func(context.Context, auth.Caller, struct{}) (State, error) { return c.State(), nil },
			dispatch.Hooks[struct{}, State]{}),
		dispatch.Define(ToolHalt, dispatch.Spec{Description: "Halt the server: refuse every non-safe tool, kill running executions, freeze sandboxes",
			Risk: guard.Safe, Roles: admin},
			func(ctx context.Context, by auth.Caller, a HaltArgs) (State, error) {
				return c.Halt(ctx, by.KeyID, a.Reason)
			},
			dispatch.Hooks[HaltArgs, State]{
				Describe:  func(a HaltArgs) dispatch.Target { return dispatch.Target{Target: a.Reason} },
				Summarize: func(_ HaltArgs, st State) map[string]any { return map[string]any{"frozen": len(st.Frozen)} },
			}),
		dispatch.Define(ToolUnhalt, dispatch.Spec{Description: "Lift a HALT and thaw the sandboxes it froze", Risk: guard.Safe, Roles: admin},
			func(ctx context.Context, _ auth.Caller, _ struct{}) (State, error) { return c.Unhalt(ctx) },
			dispatch.Hooks[struct{}, State]{}),
	}
}
