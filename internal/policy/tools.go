package policy

import (
	"context"
	"encoding/json"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names.
const (
	ToolGet = "policy.get"
	ToolSet = "policy.set"
)

// RegisterTools adds policy.get and policy.set (admin only; Safe, so an
// operator can tighten the policy while the server is halted).
func RegisterTools(d *dispatch.Dispatcher, p *Policy) {
	admin := []auth.Role{auth.RoleAdmin}
	d.MustRegister(dispatch.Tool{
		Name: ToolGet, Description: "Read the risk policy", Risk: guard.Safe, Roles: admin,
		Run: func(context.Context, auth.Caller, any) (any, error) { return p.Document(), nil },
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolSet, Description: "Replace the risk policy", Risk: guard.Safe, Roles: admin,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"roles":{"type":"object"},"keys":{"type":"object"}},"required":["roles"]}`),
		Decode: func(raw json.RawMessage) (any, error) {
			return Parse(raw)
		},
		Summarize: func(args, _ any) map[string]any {
			doc := args.(Document)
			return map[string]any{"roles": len(doc.Roles), "keys": len(doc.Keys)}
		},
		Run: func(ctx context.Context, _ auth.Caller, args any) (any, error) {
			doc := args.(Document)
			if err := p.Set(ctx, doc); err != nil {
				return nil, err
			}
			return p.Document(), nil
		},
	})
}
