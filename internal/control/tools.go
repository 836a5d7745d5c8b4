package control

import (
	"context"
	"encoding/json"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names.
const (
	ToolGet    = "control.get"
	ToolHalt   = "control.halt"
	ToolUnhalt = "control.unhalt"
)

// HaltArgs are control.halt's arguments.
type HaltArgs struct {
	Reason string `json:"reason"`
}

// RegisterTools adds control.get (every role) and control.halt /
// control.unhalt (admin only). All are Safe: they must work while halted.
func RegisterTools(d *dispatch.Dispatcher, c *Control) {
	admin := []auth.Role{auth.RoleAdmin}
	d.MustRegister(dispatch.Tool{
		Name: ToolGet, Description: "Read whether the server is halted", Risk: guard.Safe,
		Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer},
		Run:   func(context.Context, auth.Caller, any) (any, error) { return c.State(), nil },
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolHalt, Description: "Halt the server: refuse every non-safe tool, kill running executions, freeze sandboxes",
		Risk: guard.Safe, Roles: admin,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","maxLength":512}}}`),
		Decode: func(raw json.RawMessage) (any, error) {
			var a HaltArgs
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, fault.InvalidField("reason", "arguments must be {\"reason\": string}")
				}
			}
			return a, nil
		},
		Describe: func(args any) dispatch.Target {
			return dispatch.Target{Target: args.(HaltArgs).Reason}
		},
		Summarize: func(_, res any) map[string]any { return map[string]any{"frozen": len(res.(State).Frozen)} },
		Run: func(ctx context.Context, by auth.Caller, args any) (any, error) {
			return c.Halt(ctx, by.KeyID, args.(HaltArgs).Reason)
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolUnhalt, Description: "Lift a HALT and thaw the sandboxes it froze", Risk: guard.Safe, Roles: admin,
		Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) { return c.Unhalt(ctx) },
	})
}
