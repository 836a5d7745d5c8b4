package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/control"
)

// ControlOutput is the HALT state.
type ControlOutput struct {
	Body Envelope[control.State]
}

// HaltInput is POST /v1/control/halt.
type HaltInput struct {
	Body *struct {
		Reason string `json:"reason,omitempty" maxLength:"512" doc:"shown in every refusal while halted"`
	} `required:"false"`
}

// ControlRoutes mounts GET /v1/control (every role) and POST
// /v1/control/halt|unhalt (admin).
func (s *Server) ControlRoutes() {
	tag := []string{"control"}
	huma.Register(s.api, huma.Operation{OperationID: "get-control", Method: http.MethodGet, Path: "/v1/control", Tags: tag,
		Summary: "Whether the server is halted, why and since when", Security: Security},
		func(ctx context.Context, _ *struct{}) (*ControlOutput, error) {
			st, err := call(ctx, s.disp, control.ToolGet, struct{}{})
			if err != nil {
				return nil, err
			}
			return &ControlOutput{Body: OK(st)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "halt", Method: http.MethodPost, Path: "/v1/control/halt", Tags: tag,
		Summary:     "HALT (admin): refuse every non-safe tool, kill running executions, freeze sandboxes",
		Description: "Survives a restart. Only safe tools (reads, kills, approvals, policy) run until unhalt.",
		Security:    Security, MaxBodyBytes: s.MaxBody()},
		func(ctx context.Context, in *HaltInput) (*ControlOutput, error) {
			var args control.HaltArgs
			if in.Body != nil {
				args.Reason = in.Body.Reason
			}
			st, err := call(ctx, s.disp, control.ToolHalt, args)
			if err != nil {
				return nil, err
			}
			out := &ControlOutput{Body: OK(st)}
			out.Body.Message = "halted"
			return out, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "unhalt", Method: http.MethodPost, Path: "/v1/control/unhalt", Tags: tag,
		Summary: "Lift a HALT (admin) and thaw the sandboxes it froze", Security: Security},
		func(ctx context.Context, _ *struct{}) (*ControlOutput, error) {
			st, err := call(ctx, s.disp, control.ToolUnhalt, struct{}{})
			if err != nil {
				return nil, err
			}
			out := &ControlOutput{Body: OK(st)}
			out.Body.Message = "unhalted"
			return out, nil
		})
}
