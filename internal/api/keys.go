package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"
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
		// RateLimits: see auth.KeyCreateArgs.
		RateLimits string `json:"rate_limits,omitempty" maxLength:"1024" doc:"the key's own rate limits in SANDBOX_RATE_LIMITS syntax (file, code, command, browser, read, manage), each at or below the server's (above: 422)" example:"command=60/m,code=5/m"`
	}
}

// KeyCreateOutput is the answer to POST /v1/keys.
type KeyCreateOutput struct {
	Body Envelope[auth.CreatedKey]
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

func (s *Server) listKeys(ctx context.Context, _ *struct{}) (*KeyListOutput, error) {
	ks, err := call(ctx, s.disp, authtools.ToolKeysList, struct{}{})
	if err != nil {
		return nil, err
	}
	return &KeyListOutput{Body: OK(ks)}, nil
}

func (s *Server) createKey(ctx context.Context, in *KeyCreateInput) (*KeyCreateOutput, error) {
	k, err := call(ctx, s.disp, authtools.ToolKeysCreate, auth.KeyCreateArgs{Name: in.Body.Name, Role: in.Body.Role, RateLimits: in.Body.RateLimits})
	if err != nil {
		return nil, err
	}
	out := &KeyCreateOutput{Body: OK(k)}
	out.Body.Message = "key created; it is shown only once"
	return out, nil
}

func (s *Server) revokeKey(ctx context.Context, in *KeyIDInput) (*KeyOutput, error) {
	k, err := call(ctx, s.disp, authtools.ToolKeysRevoke, auth.KeyIDArgs{ID: in.ID})
	if err != nil {
		return nil, err
	}
	out := &KeyOutput{Body: OK(k)}
	out.Body.Message = "key revoked"
	return out, nil
}

// allRoles is every role: routes that admit them all before the
// dispatcher checks the tool.
var allRoles = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}
