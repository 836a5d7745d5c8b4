package customtool

import (
	"context"
	"encoding/json"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names of the management tools.
var (
	ToolList    = dispatch.Ref[struct{}, []Info]("tools.list")
	ToolDefine  = dispatch.Ref[DefineArgs, Info]("tools.define")
	ToolDelete  = dispatch.Ref[NameArgs, any]("tools.delete")
	ToolPublish = dispatch.Ref[PublishArgs, Info]("tools.publish")
)

// NameArgs name a custom tool.
type NameArgs struct {
	Name string `json:"name" required:"true"`
}

// PublishArgs are tools.publish's arguments.
type PublishArgs struct {
	Name      string `json:"name" required:"true"`
	Published bool   `json:"published" required:"true"`
}

// DefineArgs are tools.define's arguments: what a caller may set of a
// Def (its owner and times are the server's).
type DefineArgs struct {
	Name        string          `json:"name" required:"true"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty" doc:"JSON Schema (2020-12) of the arguments: an object schema, no $ref"`
	Call        *Step           `json:"call,omitempty" doc:"one call: {tool, arguments} with {arg} placeholders"`
	Steps       []Step          `json:"steps,omitempty" doc:"calls in order: {id, tool, arguments}; arguments may use {steps.id.field}"`
	Risk        string          `json:"risk,omitempty" enum:"safe,medium,dangerous" doc:"declared tier; a lower one than the derived risk is ignored"`
	Published   bool            `json:"published,omitempty" doc:"admin only: visible to every key"`
}

// Def is the definition a DefineArgs asks for.
func (a DefineArgs) Def() Def {
	return Def{Name: a.Name, Description: a.Description, InputSchema: a.InputSchema, Call: a.Call,
		Steps: a.Steps, Risk: a.Risk, Published: a.Published}
}

// Tools are the management tools: list (every role), define and delete
// (admin, agent), publish (admin). The custom tools themselves are
// registered by the Registry as they are defined.
func Tools(r *Registry) []dispatch.Tool {
	return []dispatch.Tool{
		dispatch.Define(ToolList, dispatch.Spec{Description: "List the tools the caller may call, with their risk and input schema",
			Risk: guard.Safe, Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}},
			func(_ context.Context, c auth.Caller, _ struct{}) ([]Info, error) { return r.List(c), nil },
			dispatch.Hooks[struct{}, []Info]{}),
		// Defining changes what the key can run later, not what runs now:
		// Medium (so nothing is defined while halted).
		dispatch.Define(ToolDefine, dispatch.Spec{Description: "Define or redefine a custom tool", Risk: guard.Medium},
			func(ctx context.Context, c auth.Caller, a DefineArgs) (Info, error) { return r.Define(ctx, c, a.Def()) },
			dispatch.Hooks[DefineArgs, Info]{
				Describe: func(a DefineArgs) dispatch.Target { return dispatch.Target{Target: a.Name} },
			}),
		dispatch.Define(ToolDelete, dispatch.Spec{Description: "Delete a custom tool", Risk: guard.Safe},
			func(ctx context.Context, c auth.Caller, a NameArgs) (any, error) {
				return nil, r.Delete(ctx, c, a.Name)
			},
			dispatch.Hooks[NameArgs, any]{
				Describe: func(a NameArgs) dispatch.Target { return dispatch.Target{Target: a.Name} },
			}),
		dispatch.Define(ToolPublish, dispatch.Spec{Description: "Publish a custom tool to every key (or hide it again)",
			Risk: guard.Medium, Roles: []auth.Role{auth.RoleAdmin}},
			func(ctx context.Context, _ auth.Caller, a PublishArgs) (Info, error) {
				return r.Publish(ctx, a.Name, a.Published)
			},
			dispatch.Hooks[PublishArgs, Info]{
				Describe: func(a PublishArgs) dispatch.Target { return dispatch.Target{Target: a.Name} },
			}),
	}
}
