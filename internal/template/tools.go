package template

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names of the store's own capabilities (the sources declare theirs:
// internal/template/oci, internal/build).
var (
	ToolList   = dispatch.Ref[struct{}, []Summary]("template.list")
	ToolGet    = dispatch.Ref[RefArgs, Template]("template.get")
	ToolDelete = dispatch.Ref[RefArgs, Template]("template.delete")
)

// RefArgs names a template.
type RefArgs struct {
	Ref string `json:"ref" required:"true" doc:"name[:tag] (tag latest when left out) or sha256 digest"`
}

// Summary is a template in a list: what Template is without its manifest.
type Summary struct {
	Name    string `json:"name,omitempty"`
	Tag     string `json:"tag,omitempty"`
	Digest  string `json:"digest"`
	Owner   string `json:"owner,omitempty" doc:"the key that made it; empty: public (made by an admin)"`
	Created string `json:"created"`
	Bytes   int64  `json:"bytes"`
	Layers  int    `json:"layers"`
	Source  string `json:"source" doc:"registry, upload, build or commit"`
}

// SummaryOf is t in a list.
func SummaryOf(t Template) Summary {
	return Summary{Name: t.Name, Tag: t.Tag, Digest: t.Digest, Owner: t.Owner, Created: t.Created.UTC().Format("2006-01-02T15:04:05Z"),
		Bytes: t.Bytes, Layers: len(t.Manifest.Layers), Source: t.Manifest.Source.Kind}
}

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// CallerOf is the store's view of a key: admins see every template and
// make public ones; viewers observe every template; agents see their own
// and the public ones.
func CallerOf(c auth.Caller) Caller {
	return Caller{KeyID: c.KeyID, Admin: c.IsAdmin() || c.Role == auth.RoleViewer}
}

// OwnerOf is c as the owner of what it makes or removes: an admin's
// templates are public, an agent's its own (viewers make nothing: their
// role stops them first).
func OwnerOf(c auth.Caller) Caller { return Caller{KeyID: c.KeyID, Admin: c.IsAdmin()} }

// AuditDetail is what an audit record of a call that made, used or removed
// t says about it: its name and digest.
func AuditDetail(t Template) map[string]any {
	return map[string]any{"template": Ref{Name: t.Name, Tag: t.Tag}.String(), "digest": t.Digest, "layers": len(t.Manifest.Layers), "bytes": t.Bytes}
}

// Tools declares the store's tools. gc runs after a removal (the daemon's
// collector); nil: none.
func Tools(s *Store, gc func()) []dispatch.Tool {
	target := func(a RefArgs) dispatch.Target { return dispatch.Target{Target: a.Ref} }
	return []dispatch.Tool{
		dispatch.Define(ToolList, dispatch.Spec{Description: "List the templates the caller may use (its own and the public ones)", Risk: guard.Safe, Roles: viewers, Category: ratelimit.Read},
			func(_ context.Context, c auth.Caller, _ struct{}) ([]Summary, error) {
				out := []Summary{}
				for _, t := range s.List(CallerOf(c)) {
					out = append(out, SummaryOf(t))
				}
				return out, nil
			}, dispatch.Hooks[struct{}, []Summary]{}),
		dispatch.Define(ToolGet, dispatch.Spec{Description: "Inspect a template: its layers, config and source", Risk: guard.Safe, Roles: viewers, Category: ratelimit.Read},
			func(_ context.Context, c auth.Caller, a RefArgs) (Template, error) {
				return s.Resolve(CallerOf(c), a.Ref)
			},
			dispatch.Hooks[RefArgs, Template]{Describe: target, Summarize: func(_ RefArgs, t Template) map[string]any { return map[string]any{"digest": t.Digest} }}),
		dispatch.Define(ToolDelete, dispatch.Spec{Description: "Remove a template's name; its layers go once no template or sandbox uses them", Risk: guard.Medium, Category: ratelimit.Manage},
			func(_ context.Context, c auth.Caller, a RefArgs) (Template, error) {
				t, err := s.Remove(OwnerOf(c), a.Ref)
				if err == nil && gc != nil {
					gc()
				}
				return t, err
			},
			dispatch.Hooks[RefArgs, Template]{Describe: target, Summarize: func(_ RefArgs, t Template) map[string]any { return AuditDetail(t) }}),
	}
}
