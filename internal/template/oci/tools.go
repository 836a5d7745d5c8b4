package oci

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/template"
)

// Tool names (the audit actions).
var (
	ToolPull   = dispatch.Ref[PullArgs, template.Template]("template.pull")
	ToolImport = dispatch.Ref[ImportArgs, template.Template]("template.import")
)

// Tools declares the pull and the import. Both make a template (medium
// risk: they fill the store, within its caps, and run nothing); the
// policy's tools map says which keys may use them.
func Tools(p *Puller, im *Importer) []dispatch.Tool {
	summary := func(t template.Template) map[string]any {
		m := template.AuditDetail(t)
		m["image_digest"] = t.Manifest.Source.ImageDigest
		return m
	}
	return []dispatch.Tool{
		dispatch.Define(ToolPull, dispatch.Spec{Description: "Pull an image from an allowed registry (SANDBOX_REGISTRIES) into a template", Risk: guard.Medium, Category: ratelimit.Manage, Streams: true},
			func(ctx context.Context, c auth.Caller, a PullArgs) (template.Template, error) {
				return p.Pull(ctx, template.OwnerOf(c), a)
			},
			dispatch.Hooks[PullArgs, template.Template]{
				Describe: func(a PullArgs) dispatch.Target {
					return dispatch.Target{Target: a.Image, Detail: map[string]any{"name": a.Name, "tag": tagOr(a.Tag)}}
				},
				Summarize: func(_ PullArgs, t template.Template) map[string]any { return summary(t) },
			}),
		dispatch.Define(ToolImport, dispatch.Spec{Description: "Make a template of an uploaded OCI image layout or docker save tarball (HTTP only)", Risk: guard.Medium, Category: ratelimit.Manage, Streams: true},
			func(ctx context.Context, c auth.Caller, a ImportArgs) (template.Template, error) {
				if !dispatch.Streaming(ctx) || a.Body == nil {
					return template.Template{}, fault.New(fault.Invalid, ToolImport.Name()+" streams its upload and is only available over its HTTP route")
				}
				return im.Import(ctx, template.OwnerOf(c), a)
			},
			dispatch.Hooks[ImportArgs, template.Template]{
				Describe: func(a ImportArgs) dispatch.Target {
					return dispatch.Target{Target: a.Name + ":" + tagOr(a.Tag)}
				},
				Summarize: func(_ ImportArgs, t template.Template) map[string]any { return summary(t) },
			}),
	}
}
