package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/customtool"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// ToolListOutput is GET /v1/tools.
type ToolListOutput struct {
	Body Envelope[[]customtool.Info]
}

// ToolCallInput is POST /v1/tools/call.
type ToolCallInput struct {
	Body struct {
		Name      string          `json:"name" minLength:"1" maxLength:"64" doc:"tool name, built-in or custom" example:"exec.run"`
		Arguments json.RawMessage `json:"arguments,omitempty" doc:"the tool's arguments (its input schema)"`
	}
}

// ToolCallOutput carries a tool's result.
type ToolCallOutput struct {
	Body Envelope[any]
}

// ToolDefineInput is POST /v1/tools/custom.
type ToolDefineInput struct {
	Body struct {
		Name        string            `json:"name" minLength:"1" maxLength:"64" example:"list_workspace"`
		Description string            `json:"description,omitempty" maxLength:"1024"`
		InputSchema json.RawMessage   `json:"inputSchema,omitempty" doc:"JSON Schema (2020-12) of the arguments: an object schema, no $ref"`
		Call        *customtool.Step  `json:"call,omitempty" doc:"one call: {tool, arguments} with {arg} placeholders"`
		Steps       []customtool.Step `json:"steps,omitempty" doc:"calls in order: {id, tool, arguments}; arguments may use {steps.id.field}"`
		Risk        string            `json:"risk,omitempty" enum:"safe,medium,dangerous" doc:"declared tier; a lower one than the derived risk is ignored"`
		Published   bool              `json:"published,omitempty" doc:"admin only: visible to every key"`
	}
}

// ToolInfoOutput is one tool.
type ToolInfoOutput struct {
	Body Envelope[customtool.Info]
}

// ToolNameInput names a custom tool.
type ToolNameInput struct {
	Name string `path:"name" maxLength:"64"`
}

// ToolPublishInput is POST /v1/tools/custom/{name}/publish.
type ToolPublishInput struct {
	Name string `path:"name" maxLength:"64"`
	Body struct {
		Published bool `json:"published" doc:"true: every key sees and may call it; false: only its owner"`
	}
}

// UseDispatcher makes the server's routes call d and notes, for the
// request log, the first tool each request calls. Call once, before
// serving; the tools themselves are registered by their packages' Tools.
func (s *Server) UseDispatcher(d *dispatch.Dispatcher) {
	s.disp = d
	d.Observe(noteTool)
}

// Dispatcher is UseDispatcher's dispatcher (nil before it).
func (s *Server) Dispatcher() *dispatch.Dispatcher { return s.disp }

// call calls tool with args for the request's caller (MustCaller) on d:
// a native route's one line to its tool, through every step of the
// dispatcher (Ref.Call).
func call[A, R any](ctx context.Context, d *dispatch.Dispatcher, tool dispatch.Ref[A, R], args A) (R, error) {
	c, err := MustCaller(ctx)
	if err != nil {
		var zero R
		return zero, err
	}
	return tool.Call(ctx, d, c, args)
}

// ToolRoutes mounts /v1/tools: list (with risks and schemas), call any
// tool by name, define, publish and delete custom tools. Every handler
// calls the dispatcher; /v1/tools/call is Dispatcher.Call itself.
func (s *Server) ToolRoutes() {
	tag := []string{"tools"}
	huma.Register(s.api, huma.Operation{OperationID: "list-tools", Method: http.MethodGet, Path: "/v1/tools", Tags: tag,
		Summary:     "List the tools the caller may call: name, risk, input schema (built-in and custom)",
		Description: "risk is safe, medium or dangerous; a tool whose risk is decided per call (exec.run, shell.exec, bash.exec, code.execute: the command guard rates each command) is listed as dynamic, with risk_floor and risk_ceiling.",
		Security:    Security},
		func(ctx context.Context, _ *struct{}) (*ToolListOutput, error) {
			list, err := call(ctx, s.disp, customtool.ToolList, struct{}{})
			if err != nil {
				return nil, err
			}
			return &ToolListOutput{Body: OK(list)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "call-tool", Method: http.MethodPost, Path: "/v1/tools/call", Tags: tag,
		Summary:     "Call a tool by name with JSON arguments",
		Description: "Arguments are checked against the tool's input schema (422 names the field). A call that needs an operator's approval answers 202 with an approval id.",
		Security:    Security, MaxBodyBytes: s.MaxBody()},
		func(ctx context.Context, in *ToolCallInput) (*ToolCallOutput, error) {
			c, err := MustCaller(ctx)
			if err != nil {
				return nil, err
			}
			if s.disp == nil {
				return nil, fault.New(fault.Unavailable, "the server is still starting")
			}
			res, err := s.disp.Call(ctx, c, in.Body.Name, in.Body.Arguments)
			if err != nil {
				return nil, err
			}
			return &ToolCallOutput{Body: OK(res)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "define-tool", Method: http.MethodPost, Path: "/v1/tools/custom", Tags: tag,
		Summary: "Define (or redefine) a custom tool", Security: Security, DefaultStatus: http.StatusCreated, MaxBodyBytes: s.MaxBody()},
		func(ctx context.Context, in *ToolDefineInput) (*ToolInfoOutput, error) {
			b := in.Body
			info, err := call(ctx, s.disp, customtool.ToolDefine, customtool.DefineArgs{Name: b.Name, Description: b.Description,
				InputSchema: b.InputSchema, Call: b.Call, Steps: b.Steps, Risk: b.Risk, Published: b.Published})
			if err != nil {
				return nil, err
			}
			return &ToolInfoOutput{Body: OK(info)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "publish-tool", Method: http.MethodPost, Path: "/v1/tools/custom/{name}/publish", Tags: tag,
		Summary: "Publish a custom tool to every key, or hide it again (admin)", Security: Security, MaxBodyBytes: s.MaxBody()},
		func(ctx context.Context, in *ToolPublishInput) (*ToolInfoOutput, error) {
			info, err := call(ctx, s.disp, customtool.ToolPublish, customtool.PublishArgs{Name: in.Name, Published: in.Body.Published})
			if err != nil {
				return nil, err
			}
			return &ToolInfoOutput{Body: OK(info)}, nil
		})
	huma.Register(s.api, huma.Operation{OperationID: "delete-tool", Method: http.MethodDelete, Path: "/v1/tools/custom/{name}", Tags: tag,
		Summary: "Delete a custom tool (its owner or an admin)", Security: Security},
		func(ctx context.Context, in *ToolNameInput) (*EmptyOutput, error) {
			if _, err := call(ctx, s.disp, customtool.ToolDelete, customtool.NameArgs{Name: in.Name}); err != nil {
				return nil, err
			}
			return done("custom tool deleted"), nil
		})
}
