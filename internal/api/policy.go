package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/policy"
)

// PolicyOutput is the policy document.
type PolicyOutput struct {
	Body Envelope[policy.Document]
}

// PolicyInput is PUT /v1/policy: the whole document, replaced atomically.
type PolicyInput struct {
	Body policy.Document
}

// PolicyRoutes mounts GET and PUT /v1/policy (admin; agents get 403,
// audited by the dispatcher).
func (s *Server) PolicyRoutes() {
	tag := []string{"policy"}
	huma.Register(s.api, huma.Operation{OperationID: "get-policy", Method: http.MethodGet, Path: "/v1/policy", Tags: tag,
		Summary: "Read the risk policy (admin)", Security: Security},
		func(ctx context.Context, _ *struct{}) (*PolicyOutput, error) {
			doc, err := call(ctx, s.disp, policy.ToolGet, struct{}{})
			if err != nil {
				return nil, err
			}
			return &PolicyOutput{Body: OK(doc)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "put-policy", Method: http.MethodPut, Path: "/v1/policy", Tags: tag,
		Summary: "Replace the risk policy (admin)", Description: "Rules per role (admin, agent, viewer) and per key id; see SECURITY.md, Risk policy.",
		Security: Security, MaxBodyBytes: s.MaxBody()},
		func(ctx context.Context, in *PolicyInput) (*PolicyOutput, error) {
			doc, err := call(ctx, s.disp, policy.ToolSet, in.Body)
			if err != nil {
				return nil, err
			}
			out := &PolicyOutput{Body: OK(doc)}
			out.Body.Message = "policy replaced"
			return out, nil
		})
}
