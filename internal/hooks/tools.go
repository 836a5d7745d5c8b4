package hooks

import (
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tool names (the audit actions; a hook's run is audited as sandbox.hook).
var (
	ToolRegister = dispatch.Ref[RegisterArgs, Hook]("sandbox.hooks.register")
	ToolList     = dispatch.Ref[ListArgs, []Hook]("sandbox.hooks.list")
	ToolRemove   = dispatch.Ref[RemoveArgs, Removed]("sandbox.hooks.remove")
)

// Tools are the hook tools. Registering is rated by the command guard on
// the hook's command, at least Medium (it runs later, unattended); the
// policy's command rules see the command then.
func (s *Service) Tools(g *guard.Guard) []dispatch.Tool {
	return []dispatch.Tool{
		dispatch.Define(ToolRegister, dispatch.Spec{Risk: guard.Medium, RiskCeiling: guard.Dangerous,
			Description: "Register a command to run inside the sandbox on a lifecycle event (shutdown: before the sandbox is deleted, stopped idle, or the server stops)"},
			s.Register, dispatch.Hooks[RegisterArgs, Hook]{
				Assess: func(a RegisterArgs) dispatch.Assessment {
					as := dispatch.FromVerdict(g.Classify(a.Command))
					as.Risk = max(as.Risk, guard.Medium)
					return as
				},
				Describe: func(a RegisterArgs) dispatch.Target {
					return dispatch.Target{Target: a.Name, Sandbox: a.Sandbox, Detail: map[string]any{"command": a.Command, "event": a.Event}}
				},
			}),
		dispatch.Define(ToolList, dispatch.Spec{Risk: guard.Safe,
			Description: "List the sandbox's lifecycle hooks of an event, in the order they run"},
			s.List, dispatch.Hooks[ListArgs, []Hook]{
				Describe: func(a ListArgs) dispatch.Target { return dispatch.Target{Sandbox: a.Sandbox} },
			}),
		dispatch.Define(ToolRemove, dispatch.Spec{Risk: guard.Medium,
			Description: "Remove a lifecycle hook by name"},
			s.Remove, dispatch.Hooks[RemoveArgs, Removed]{
				Describe: func(a RemoveArgs) dispatch.Target { return dispatch.Target{Target: a.Name, Sandbox: a.Sandbox} },
			}),
	}
}
