package build

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/template"
)

// Tool names (the audit actions).
var (
	ToolBuild  = dispatch.Ref[Args, template.Template]("template.build")
	ToolCommit = dispatch.Ref[CommitArgs, template.Template]("template.commit")
	ToolLog    = dispatch.Ref[LogArgs, string]("template.build_log")
)

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// Tools declares the build and the commit. A build's RUN steps are calls
// of exec.run of their own (the guard rates each command, the policy
// decides, the audit records it), made as the build's caller.
func Tools(b *Builder) []dispatch.Tool {
	summary := func(t template.Template) map[string]any {
		m := template.AuditDetail(t)
		m["parent"] = t.Manifest.Source.Parent
		if t.Manifest.Source.Build != "" {
			m["build"] = t.Manifest.Source.Build
		}
		return m
	}
	return []dispatch.Tool{
		dispatch.Define(ToolBuild, dispatch.Spec{Description: "Build a Dockerfile (subset) into a template; each RUN runs in a sandbox as the caller, each step is a cached layer", Risk: guard.Medium, Category: ratelimit.Manage, Streams: true},
			func(ctx context.Context, c auth.Caller, a Args) (template.Template, error) { return b.Build(ctx, c, a) },
			dispatch.Hooks[Args, template.Template]{
				// The templates its FROM names, for the policy's template
				// rules (a Dockerfile inside an uploaded context is read
				// later: the tools map decides who may build).
				Assess: func(a Args) dispatch.Assessment {
					return dispatch.Assessment{Risk: guard.Medium, Templates: fromNames(a.Dockerfile)}
				},
				Describe: func(a Args) dispatch.Target {
					return dispatch.Target{Target: a.Name + ":" + tagOr(a.Tag), Detail: map[string]any{"network": a.Network.Mode, "no_cache": a.NoCache, "context": a.Context != nil}}
				},
				Summarize: func(_ Args, t template.Template) map[string]any { return summary(t) },
			}),
		dispatch.Define(ToolCommit, dispatch.Spec{Description: "Make a template of a template sandbox's changes to its root (its writable layer over its template)", Risk: guard.Medium, Category: ratelimit.Manage},
			func(ctx context.Context, c auth.Caller, a CommitArgs) (template.Template, error) {
				return b.Commit(ctx, c, a)
			},
			dispatch.Hooks[CommitArgs, template.Template]{
				Describe: func(a CommitArgs) dispatch.Target {
					return dispatch.Target{Target: a.Name + ":" + tagOr(a.Tag), Sandbox: a.ID}
				},
				Summarize: func(_ CommitArgs, t template.Template) map[string]any { return summary(t) },
			}),
		dispatch.Define(ToolLog, dispatch.Spec{Description: "Read a build's kept log", Risk: guard.Safe, Category: ratelimit.Read, Roles: viewers},
			func(_ context.Context, c auth.Caller, a LogArgs) (string, error) { return b.Log(c, a.Build) },
			dispatch.Hooks[LogArgs, string]{Describe: func(a LogArgs) dispatch.Target { return dispatch.Target{Target: a.Build} }}),
	}
}

// fromNames lists the FROM references of a Dockerfile's text as the
// policy matches them.
func fromNames(text string) []string {
	ins, err := Parse(text)
	if err != nil {
		return nil
	}
	var out []string
	for _, in := range ins {
		if in.Cmd != "FROM" {
			continue
		}
		ws, _ := words(in.Rest)
		if len(ws) > 0 && ws[0] != "scratch" {
			out = append(out, template.PolicyName(ws[0]))
		}
	}
	return out
}
