// Package authtools declares the key and ticket tools (keys.*,
// tickets.create) for the dispatcher. They live above both packages, not
// in auth, because the dispatcher takes auth's Caller: package auth cannot
// import dispatch.
package authtools

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// The key and ticket tools.
var (
	ToolKeysList      = dispatch.Ref[struct{}, []auth.KeyInfo]("keys.list")
	ToolKeysCreate    = dispatch.Ref[auth.KeyCreateArgs, auth.CreatedKey]("keys.create")
	ToolKeysRevoke    = dispatch.Ref[auth.KeyIDArgs, auth.KeyInfo]("keys.revoke")
	ToolTicketsCreate = dispatch.Ref[auth.TicketArgs, auth.Ticket]("tickets.create")
)

// Tools are keys.list, keys.create, keys.revoke (admin only) and
// tickets.create (every role).
func Tools(s *auth.Service) []dispatch.Tool {
	admin := []auth.Role{auth.RoleAdmin}
	return []dispatch.Tool{
		dispatch.Define(ToolKeysList, dispatch.Spec{Description: "List API keys", Risk: guard.Safe, Roles: admin},
			func(ctx context.Context, _ auth.Caller, _ struct{}) ([]auth.KeyInfo, error) {
				ks, err := s.ListKeys(ctx)
				if err == nil && ks == nil {
					ks = []auth.KeyInfo{}
				}
				return ks, err
			},
			dispatch.Hooks[struct{}, []auth.KeyInfo]{}),
		// Creating a key hands out capability: Medium, so a halted server
		// mints no new keys.
		dispatch.Define(ToolKeysCreate, dispatch.Spec{Description: "Create an API key", Risk: guard.Medium, Roles: admin},
			func(ctx context.Context, c auth.Caller, a auth.KeyCreateArgs) (auth.CreatedKey, error) {
				info, secret, err := s.CreateKeyWithLimits(ctx, c, a.Name, auth.Role(a.Role), a.RateLimits)
				if err != nil {
					return auth.CreatedKey{}, err
				}
				return auth.CreatedKey{ID: info.ID, Name: info.Name, Role: info.Role, Key: secret, CreatedAt: info.CreatedAt, RateLimits: info.RateLimits}, nil
			},
			dispatch.Hooks[auth.KeyCreateArgs, auth.CreatedKey]{
				Describe: func(a auth.KeyCreateArgs) dispatch.Target { return dispatch.Target{Target: a.Name} },
				Summarize: func(_ auth.KeyCreateArgs, k auth.CreatedKey) map[string]any {
					return map[string]any{"key_id": k.ID, "role": string(k.Role), "rate_limits": k.RateLimits}
				},
			}),
		// Revoking only takes capability away: Safe, so it works while halted.
		dispatch.Define(ToolKeysRevoke, dispatch.Spec{Description: "Revoke an API key", Risk: guard.Safe, Roles: admin},
			func(ctx context.Context, c auth.Caller, a auth.KeyIDArgs) (auth.KeyInfo, error) {
				return s.RevokeKey(ctx, c, a.ID)
			},
			dispatch.Hooks[auth.KeyIDArgs, auth.KeyInfo]{
				Describe: func(a auth.KeyIDArgs) dispatch.Target { return dispatch.Target{Target: a.ID} },
			}),
		dispatch.Define(ToolTicketsCreate, dispatch.Spec{Description: "Mint a one-time ticket for a WebSocket or browser request", Risk: guard.Safe,
			Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}},
			func(ctx context.Context, c auth.Caller, a auth.TicketArgs) (auth.Ticket, error) {
				t, exp, err := s.IssueTicket(ctx, c, auth.TicketScope(a.Scope))
				if err != nil {
					return auth.Ticket{}, err
				}
				return auth.Ticket{Ticket: t, Scope: a.Scope, ExpiresAt: exp}, nil
			},
			dispatch.Hooks[auth.TicketArgs, auth.Ticket]{
				Describe: func(a auth.TicketArgs) dispatch.Target { return dispatch.Target{Target: a.Scope} },
			}),
	}
}
