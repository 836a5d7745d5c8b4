package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/auth"
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

func (s *Server) admin(ctx context.Context, action string) (auth.Caller, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		return c, err
	}
	return c, s.auth.Require(ctx, c, action, auth.RoleAdmin)
}

func (s *Server) listKeys(ctx context.Context, _ *struct{}) (*KeyListOutput, error) {
	if _, err := s.admin(ctx, "list keys"); err != nil {
		return nil, err
	}
	ks, err := s.auth.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	if ks == nil {
		ks = []auth.KeyInfo{}
	}
	return &KeyListOutput{Body: OK(ks)}, nil
}

func (s *Server) createKey(ctx context.Context, in *KeyCreateInput) (*KeyCreateOutput, error) {
	c, err := s.admin(ctx, "create keys")
	if err != nil {
		return nil, err
	}
	info, secret, err := s.auth.CreateKey(ctx, c, in.Body.Name, auth.Role(in.Body.Role))
	if err != nil {
		return nil, err
	}
	out := &KeyCreateOutput{Body: OK(CreatedKey{ID: info.ID, Name: info.Name, Role: info.Role, Key: secret, CreatedAt: info.CreatedAt})}
	out.Body.Message = "key created; it is shown only once"
	return out, nil
}

func (s *Server) revokeKey(ctx context.Context, in *KeyIDInput) (*KeyOutput, error) {
	c, err := s.admin(ctx, "revoke keys")
	if err != nil {
		return nil, err
	}
	info, err := s.auth.RevokeKey(ctx, c, in.ID)
	if err != nil {
		return nil, err
	}
	out := &KeyOutput{Body: OK(info)}
	out.Body.Message = "key revoked"
	return out, nil
}
