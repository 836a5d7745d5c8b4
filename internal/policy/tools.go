package policy

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names.
var (
	ToolGet = dispatch.Ref[struct{}, Document]("policy.get")
	ToolSet = dispatch.Ref[Document, Document]("policy.set")
)

// Tools are policy.get and policy.set (admin only; Safe, so an operator
// can tighten the policy while the server is halted). policy.set takes a
// Document: read strictly, and its Validate is the dispatcher's check.
func Tools(p *Policy) []dispatch.Tool {
	admin := []auth.Role{auth.RoleAdmin}
	return []dispatch.Tool{
		dispatch.Define(ToolGet, dispatch.Spec{Description: "Read the risk policy", Risk: guard.Safe, Roles: admin},
			func(context.Context, auth.Caller, struct{}) (Document, error) { return p.Document(), nil },
			dispatch.Hooks[struct{}, Document]{}),
		dispatch.Define(ToolSet, dispatch.Spec{Description: "Replace the risk policy", Risk: guard.Safe, Roles: admin},
			func(ctx context.Context, _ auth.Caller, doc Document) (Document, error) {
				if err := p.Set(ctx, doc); err != nil {
					return Document{}, err
				}
				return p.Document(), nil
			},
			dispatch.Hooks[Document, Document]{
				Summarize: func(doc Document, _ Document) map[string]any {
					return map[string]any{"roles": len(doc.Roles), "keys": len(doc.Keys)}
				},
			}),
	}
}
