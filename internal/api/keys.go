package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// KeyListOutput is GET /v1/keys.
type KeyListOutput struct {
	Body Envelope[[]auth.KeyInfo]
}

// KeyCreateInput is POST /v1/keys.
type KeyCreateInput struct {
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"64" doc:"a label for the key" example:"ci-agent"`
		Role string `json:"role" enum:"admin,agent,viewer" doc:"what the key may do" example:"agent"`
	}
}

// CreatedKey is a new key with its secret, shown only in this response.
type CreatedKey struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      auth.Role `json:"role"`
	Key       string    `json:"key" doc:"the secret; store it now, it is never shown again"`
	CreatedAt time.Time `json:"created_at"`
}

// KeyCreateOutput is the answer to POST /v1/keys.
type KeyCreateOutput struct {
	Body Envelope[CreatedKey]
}

// KeyIDInput names a key in the path.
type KeyIDInput struct {
	ID string `path:"id" maxLength:"64" doc:"key id"`
}

// KeyOutput is one key.
type KeyOutput struct {
	Body Envelope[auth.KeyInfo]
}

func (s *Server) keyRoutes() {
	huma.Register(s.api, huma.Operation{
		OperationID: "list-keys", Method: http.MethodGet, Path: "/v1/keys", Tags: []string{"keys"},
		Summary: "List API keys (admin)", Security: Security,
	}, s.listKeys)
	huma.Register(s.api, huma.Operation{
		OperationID: "create-key", Method: http.MethodPost, Path: "/v1/keys", Tags: []string{"keys"},
		Summary: "Create an API key (admin); the key is shown only in this response", Security: Security,
		DefaultStatus: http.StatusCreated, MaxBodyBytes: s.MaxBody(),
	}, s.createKey)
	huma.Register(s.api, huma.Operation{
		OperationID: "revoke-key", Method: http.MethodDelete, Path: "/v1/keys/{id}", Tags: []string{"keys"},
		Summary: "Revoke an API key (admin); effective on its next request", Security: Security,
	}, s.revokeKey)
}

// Tool names of the foundation's capabilities.
const (
	ToolKeysList      = "keys.list"
	ToolKeysCreate    = "keys.create"
	ToolKeysRevoke    = "keys.revoke"
	ToolTicketsCreate = "tickets.create"
	ToolAuditQuery    = "audit.query"
	ToolAuditVerify   = "audit.verify"
)

// KeyCreateArgs are keys.create's arguments.
type KeyCreateArgs struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// KeyIDArgs name a key.
type KeyIDArgs struct {
	ID string `json:"id"`
}

var (
	adminOnly = []auth.Role{auth.RoleAdmin}
	allRoles  = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}
)

// FoundationTools registers the foundation's capabilities (keys, tickets,
// audit) as dispatcher tools and makes their routes call d. Call once,
// before serving.
func (s *Server) FoundationTools(d *dispatch.Dispatcher) {
	s.disp = d
	d.Observe(noteTool)
	for _, t := range AuthTools() {
		d.MustRegister(t)
	}
	d.MustRegister(dispatch.Tool{
		Name: ToolKeysList, Description: "List API keys", Risk: guard.Safe, Roles: adminOnly,
		Run: func(ctx context.Context, _ auth.Caller, _ any) (any, error) { return s.auth.ListKeys(ctx) },
	})
	// Creating a key hands out capability: Medium, so a halted server
	// mints no new keys.
	d.MustRegister(dispatch.Tool{
		Name: ToolKeysCreate, Description: "Create an API key", Risk: guard.Medium, Roles: adminOnly,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":64},"role":{"type":"string","enum":["admin","agent","viewer"]}},"required":["name","role"]}`),
		Decode:      decodeArgs[KeyCreateArgs],
		Describe:    func(args any) dispatch.Target { return dispatch.Target{Target: args.(KeyCreateArgs).Name} },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(KeyCreateArgs)
			info, secret, err := s.auth.CreateKey(ctx, c, a.Name, auth.Role(a.Role))
			if err != nil {
				return nil, err
			}
			return CreatedKey{ID: info.ID, Name: info.Name, Role: info.Role, Key: secret, CreatedAt: info.CreatedAt}, nil
		},
		Summarize: func(_, res any) map[string]any {
			k := res.(CreatedKey)
			return map[string]any{"key_id": k.ID, "role": string(k.Role)}
		},
	})
	// Revoking only takes capability away: Safe, so it works while halted.
	d.MustRegister(dispatch.Tool{
		Name: ToolKeysRevoke, Description: "Revoke an API key", Risk: guard.Safe, Roles: adminOnly,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		Decode:      decodeArgs[KeyIDArgs],
		Describe:    func(args any) dispatch.Target { return dispatch.Target{Target: args.(KeyIDArgs).ID} },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			return s.auth.RevokeKey(ctx, c, args.(KeyIDArgs).ID)
		},
	})
	s.ticketTools(d)
	s.auditTools(d)
}

// decodeArgs decodes a tool's JSON arguments strictly.
func decodeArgs[T any](raw json.RawMessage) (any, error) {
	var v T
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fault.InvalidField("arguments", "arguments do not match the tool's schema: "+err.Error())
	}
	return v, nil
}

// call dispatches tool for the request's caller.
func (s *Server) call(ctx context.Context, tool string, args any) (any, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		return nil, err
	}
	if s.disp == nil {
		return nil, fault.New(fault.Unavailable, "the server is still starting")
	}
	return s.disp.Dispatch(ctx, c, tool, args)
}

func (s *Server) listKeys(ctx context.Context, _ *struct{}) (*KeyListOutput, error) {
	res, err := s.call(ctx, ToolKeysList, nil)
	if err != nil {
		return nil, err
	}
	ks := res.([]auth.KeyInfo)
	if ks == nil {
		ks = []auth.KeyInfo{}
	}
	return &KeyListOutput{Body: OK(ks)}, nil
}

func (s *Server) createKey(ctx context.Context, in *KeyCreateInput) (*KeyCreateOutput, error) {
	res, err := s.call(ctx, ToolKeysCreate, KeyCreateArgs{Name: in.Body.Name, Role: in.Body.Role})
	if err != nil {
		return nil, err
	}
	out := &KeyCreateOutput{Body: OK(res.(CreatedKey))}
	out.Body.Message = "key created; it is shown only once"
	return out, nil
}

func (s *Server) revokeKey(ctx context.Context, in *KeyIDInput) (*KeyOutput, error) {
	res, err := s.call(ctx, ToolKeysRevoke, KeyIDArgs{ID: in.ID})
	if err != nil {
		return nil, err
	}
	out := &KeyOutput{Body: OK(res.(auth.KeyInfo))}
	out.Body.Message = "key revoked"
	return out, nil
}
