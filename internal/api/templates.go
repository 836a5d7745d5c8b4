package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/template"
)

// TemplateRoutes mounts the template store's routes: list, inspect and
// remove. Each calls its dispatched tool (template.list, template.get,
// template.delete); the sources (pull, import, build, commit) mount
// their own.
func (s *Server) TemplateRoutes(d *dispatch.Dispatcher) {
	reg := func(op huma.Operation) huma.Operation {
		op.Tags = []string{"templates"}
		op.Security = Security
		return op
	}
	huma.Register(s.api, reg(huma.Operation{OperationID: "list-templates", Method: http.MethodGet, Path: "/v1/templates",
		Summary: "List the templates the caller may use (its own and the public ones; host is built in)"}),
		func(ctx context.Context, _ *struct{}) (*TemplateListOutput, error) {
			out, err := call(ctx, d, template.ToolList, struct{}{})
			if err != nil {
				return nil, err
			}
			return &TemplateListOutput{Body: OK(out)}, nil
		})
	huma.Register(s.api, reg(huma.Operation{OperationID: "get-template", Method: http.MethodGet, Path: "/v1/templates/{ref}",
		Summary: "Inspect a template: layers, config, source"}),
		func(ctx context.Context, in *TemplateRefInput) (*TemplateOutput, error) {
			t, err := call(ctx, d, template.ToolGet, template.RefArgs{Ref: in.Ref})
			if err != nil {
				return nil, err
			}
			return &TemplateOutput{Body: OK(t)}, nil
		})
	huma.Register(s.api, reg(huma.Operation{OperationID: "delete-template", Method: http.MethodDelete, Path: "/v1/templates/{ref}",
		Summary: "Remove a template's name (its layers go once no template or sandbox uses them)"}),
		func(ctx context.Context, in *TemplateRefInput) (*TemplateOutput, error) {
			t, err := call(ctx, d, template.ToolDelete, template.RefArgs{Ref: in.Ref})
			if err != nil {
				return nil, err
			}
			out := &TemplateOutput{Body: OK(t)}
			out.Body.Message = "template removed"
			return out, nil
		})
}

// TemplateRefInput names a template in a path.
type TemplateRefInput struct {
	Ref string `path:"ref" maxLength:"300" doc:"name[:tag] or sha256 digest"`
}

// TemplateListOutput is GET /v1/templates.
type TemplateListOutput struct {
	Body Envelope[[]template.Summary]
}

// TemplateOutput is one template.
type TemplateOutput struct {
	Body Envelope[template.Template]
}
