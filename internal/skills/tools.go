package skills

import (
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names (the audit actions).
var (
	ToolRegister = dispatch.Ref[RegisterArgs, RegisterResult]("skills.register")
	ToolList     = dispatch.Ref[NamesArgs, Collection]("skills.list")
	ToolContent  = dispatch.Ref[NameArgs, Content]("skills.content")
	ToolDelete   = dispatch.Ref[NameArgs, Metadata]("skills.delete")
	ToolClear    = dispatch.Ref[ClearArgs, Cleared]("skills.clear")
)

// Tools are the skills tools: reading is Safe, registering and deleting
// change the workspace (Medium). All count as file operations.
func (s *Service) Tools() []dispatch.Tool {
	target := func(sb, t string) dispatch.Target { return dispatch.Target{Target: t, Sandbox: sb} }
	return []dispatch.Tool{
		dispatch.Define(ToolRegister, dispatch.Spec{Risk: guard.Medium, Category: ratelimit.File,
			Description: "Register skills in the sandbox (/workspace/.skills/<name>) from a zip or a directory or .zip in the sandbox; each skill is a directory with SKILL.md"},
			s.Register, dispatch.Hooks[RegisterArgs, RegisterResult]{
				Assess: func(a RegisterArgs) dispatch.Assessment {
					as := dispatch.Assessment{Risk: guard.Medium}
					if a.Path != "" {
						as.Paths = []string{a.Path}
					}
					return as
				},
				Describe: func(a RegisterArgs) dispatch.Target {
					t := target(a.Sandbox, a.Path)
					t.Detail = map[string]any{"zip_bytes": len(a.Zip), "name": a.Name, "upload": a.Upload != nil}
					return t
				},
				Summarize: func(_ RegisterArgs, r RegisterResult) map[string]any {
					names := make([]string, len(r.Registered))
					for i, m := range r.Registered {
						names[i] = m.Name
					}
					return map[string]any{"count": r.Count, "skills": names, "sandbox_id": r.SandboxID}
				},
			}),
		dispatch.Define(ToolList, dispatch.Spec{Risk: guard.Safe, Category: ratelimit.File,
			Description: "List the metadata (SKILL.md front matter) of the sandbox's skills"},
			s.List, dispatch.Hooks[NamesArgs, Collection]{
				Describe: func(a NamesArgs) dispatch.Target { return target(a.Sandbox, a.Names) },
			}),
		dispatch.Define(ToolContent, dispatch.Spec{Risk: guard.Safe, Category: ratelimit.File,
			Description: "Read a skill's SKILL.md without its front matter"},
			s.Content, dispatch.Hooks[NameArgs, Content]{
				Describe: func(a NameArgs) dispatch.Target { return target(a.Sandbox, a.Name) },
			}),
		dispatch.Define(ToolDelete, dispatch.Spec{Risk: guard.Medium, Category: ratelimit.File,
			Description: "Delete one skill from the sandbox"},
			s.Delete, dispatch.Hooks[NameArgs, Metadata]{
				Describe: func(a NameArgs) dispatch.Target { return target(a.Sandbox, a.Name) },
			}),
		dispatch.Define(ToolClear, dispatch.Spec{Risk: guard.Medium, Category: ratelimit.File,
			Description: "Delete every skill of the sandbox"},
			s.Clear, dispatch.Hooks[ClearArgs, Cleared]{
				Describe: func(a ClearArgs) dispatch.Target { return target(a.Sandbox, "") },
				Summarize: func(_ ClearArgs, r Cleared) map[string]any {
					return map[string]any{"count": r.Count, "skills": r.Deleted}
				},
			}),
	}
}
