package customtool

import (
	"context"
	"encoding/json"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names of the management tools.
const (
	ToolList    = "tools.list"
	ToolDefine  = "tools.define"
	ToolDelete  = "tools.delete"
	ToolPublish = "tools.publish"
)

// NameArgs name a custom tool.
type NameArgs struct {
	Name string `json:"name"`
}

// PublishArgs are tools.publish's arguments.
type PublishArgs struct {
	Name      string `json:"name"`
	Published bool   `json:"published"`
}

func decodeStrict[T any](raw json.RawMessage) (any, error) {
	var v T
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fault.InvalidField("arguments", "arguments do not match the tool's schema")
	}
	return v, nil
}

// RegisterTools adds the management tools: list (every role), define and
// delete (admin, agent), publish (admin).
func (r *Registry) RegisterTools() {
	d := r.d
	d.MustRegister(dispatch.Tool{
		Name: ToolList, Description: "List the tools the caller may call, with their risk and input schema", Risk: guard.Safe,
		Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer},
		Run:   func(_ context.Context, c auth.Caller, _ any) (any, error) { return r.List(c), nil },
	})
	// Defining changes what the key can run later, not what runs now:
	// Medium (so nothing is defined while halted).
	d.MustRegister(dispatch.Tool{
		Name: ToolDefine, Description: "Define or redefine a custom tool", Risk: guard.Medium,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"description":{"type":"string"},"inputSchema":{"type":"object"},"call":{"type":"object"},"steps":{"type":"array"},"risk":{"type":"string","enum":["safe","medium","dangerous"]},"published":{"type":"boolean"}},"required":["name"]}`),
		Decode:      decodeStrict[Def],
		Describe:    func(args any) dispatch.Target { return dispatch.Target{Target: args.(Def).Name} },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			return r.Define(ctx, c, args.(Def))
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolDelete, Description: "Delete a custom tool", Risk: guard.Safe,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		Decode:      decodeStrict[NameArgs],
		Describe:    func(args any) dispatch.Target { return dispatch.Target{Target: args.(NameArgs).Name} },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			return nil, r.Delete(ctx, c, args.(NameArgs).Name)
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolPublish, Description: "Publish a custom tool to every key (or hide it again)", Risk: guard.Medium,
		Roles:       []auth.Role{auth.RoleAdmin},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"published":{"type":"boolean"}},"required":["name","published"]}`),
		Decode:      decodeStrict[PublishArgs],
		Describe:    func(args any) dispatch.Target { return dispatch.Target{Target: args.(PublishArgs).Name} },
		Run: func(ctx context.Context, _ auth.Caller, args any) (any, error) {
			a := args.(PublishArgs)
			return r.Publish(ctx, a.Name, a.Published)
		},
	})
}
