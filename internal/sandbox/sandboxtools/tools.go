// Package sandboxtools defines the sandbox capabilities' tools over the
// manager's exported methods: create, list, get, delete, pause, resume,
// resources, exec.run/read/kill, the snapshot tools, hibernate and
// network.update (NetworkTools). Their references and argument types
// (sandbox.ToolCreate, sandbox.ExecArgs, ...) stay in package sandbox,
// which every caller of a tool names; the acts the manager dispatches on
// its own (sandbox.create_default, sandbox.start, sandbox.adopt) are
// sandbox.ImplicitTools, which Tools includes.
package sandboxtools

import (
	"context"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/template"
)

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// Tools declares the sandbox capabilities; the guard rates commands.
// Arguments are read strictly (an unknown field is refused).
func Tools(m *sandbox.Manager, g *guard.Guard) []dispatch.Tool {
	tools := []dispatch.Tool{
		createTool(m), listTool(m),
		byID(sandbox.ToolGet, "Get a sandbox", guard.Safe, viewers, func(ctx context.Context, c auth.Caller, id string) (sandbox.Info, error) {
			s, err := m.Lookup(ctx, sandbox.CallerOf(c), id)
			if err != nil {
				return sandbox.Info{}, err
			}
			return s.Info(), nil
		}),
		byID(sandbox.ToolDelete, "Delete a sandbox and its workspace", guard.Medium, nil, onSandbox(m.Delete)),
		byID(sandbox.ToolPause, "Freeze a sandbox", guard.Medium, nil, onSandbox(m.Pause)),
		// Resume only undoes a pause (and HALT keeps its own freeze: see
		// HaltFreeze).
		byID(sandbox.ToolResume, "Thaw a paused sandbox", guard.Medium, nil, onSandbox(m.Resume)),
		resourcesTool(m), execTool(m, g), execReadTool(m), execKillTool(m),
	}
	tools = append(tools, sandbox.ImplicitTools(m)...)
	return append(tools, snapshotTools(m)...)
}

func createTool(m *sandbox.Manager) dispatch.Tool {
	return dispatch.Define(sandbox.ToolCreate, dispatch.Spec{Description: "Create a sandbox", Risk: guard.Medium},
		func(ctx context.Context, c auth.Caller, spec sandbox.Spec) (sandbox.Info, error) {
			return m.Create(ctx, sandbox.CallerOf(c), spec)
		}, dispatch.Hooks[sandbox.Spec, sandbox.Info]{
			// The template it uses, for the policy's template rules.
			Assess: func(s sandbox.Spec) dispatch.Assessment {
				return dispatch.Assessment{Risk: guard.Medium, Templates: []string{template.PolicyName(s.Template)}}
			},
			Summarize: func(_ sandbox.Spec, in sandbox.Info) map[string]any {
				out := map[string]any{"sandbox": in.ID}
				if in.TemplateDigest != "" {
					out["template"], out["template_digest"] = in.Template, in.TemplateDigest
				}
				if in.Snapshot != "" {
					out["snapshot"] = in.Snapshot
					m.SnapshotAudit(out, "snapshot_digest", in.Snapshot)
				}
				return out
			},
		})
}

func listTool(m *sandbox.Manager) dispatch.Tool {
	return dispatch.Define(sandbox.ToolList, dispatch.Spec{Description: "List sandboxes", Risk: guard.Safe, Roles: viewers},
		func(_ context.Context, c auth.Caller, _ sandbox.NoArgs) ([]sandbox.Info, error) {
			return m.List(sandbox.CallerOf(c)), nil
		},
		dispatch.Hooks[sandbox.NoArgs, []sandbox.Info]{})
}

func resourcesTool(m *sandbox.Manager) dispatch.Tool {
	return dispatch.Define(sandbox.ToolResources, dispatch.Spec{Description: "Live cgroup figures per sandbox", Risk: guard.Safe, Roles: viewers},
		func(_ context.Context, c auth.Caller, _ sandbox.NoArgs) ([]sandbox.Stats, error) {
			return m.Resources(sandbox.CallerOf(c)), nil
		},
		dispatch.Hooks[sandbox.NoArgs, []sandbox.Stats]{})
}

// onSandbox is the run of a byID tool that acts on the caller's own
// sandbox (an admin's: any).
func onSandbox(run func(context.Context, sandbox.Caller, string) error) func(context.Context, auth.Caller, string) (sandbox.Empty, error) {
	return func(ctx context.Context, c auth.Caller, id string) (sandbox.Empty, error) {
		return nil, run(ctx, sandbox.Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, id)
	}
}

// byID declares a tool whose one argument names a sandbox.
func byID[R any](name dispatch.Ref[sandbox.IDArgs, R], desc string, risk guard.Risk, roles []auth.Role, run func(context.Context, auth.Caller, string) (R, error)) dispatch.Tool {
	return dispatch.Define(name, dispatch.Spec{Description: desc, Risk: risk, Roles: roles},
		func(ctx context.Context, c auth.Caller, a sandbox.IDArgs) (R, error) { return run(ctx, c, a.ID) },
		dispatch.Hooks[sandbox.IDArgs, R]{Describe: func(a sandbox.IDArgs) dispatch.Target { return dispatch.Target{Sandbox: a.ID} }})
}

func execTool(m *sandbox.Manager, g *guard.Guard) dispatch.Tool {
	// The command is held in the init until the call's record is durable
	// (Exec, spawnIn): the record's sync runs beside its start.
	spec := dispatch.Spec{Description: "Run a command in a sandbox", Risk: guard.Safe, Category: ratelimit.Exec, Streams: true,
		Commands: dispatch.HeldCommand}
	return dispatch.Define(sandbox.ToolExec, spec, func(ctx context.Context, c auth.Caller, a sandbox.ExecArgs) (sandbox.ExecResult, error) {
		s, err := m.Resolve(ctx, c, a.ID)
		if err != nil {
			return sandbox.ExecResult{}, err
		}
		req := a.Request()
		req.Actor = c.KeyID
		req.PrivilegedEnv = c.IsAdmin()
		stream := dispatch.Streaming(ctx) && !req.Background
		if stream {
			// The streaming caller reads the output as it comes and kills
			// the execution when its client goes.
			req.Background = true
		}
		e, err := s.Exec(ctx, req)
		if err != nil {
			return sandbox.ExecResult{}, err
		}
		if stream {
			return sandbox.Streamed(e), nil
		}
		return sandbox.ExecResult{Result: e.Result()}, nil
	}, dispatch.Hooks[sandbox.ExecArgs, sandbox.ExecResult]{
		Assess: func(a sandbox.ExecArgs) dispatch.Assessment { return sandbox.AssessCommand(g, a.Request()) },
		Describe: func(a sandbox.ExecArgs) dispatch.Target {
			cmd := a.Command
			if cmd == "" {
				cmd = strings.Join(a.Argv, " ")
			}
			return dispatch.Target{Target: cmd, Sandbox: a.ID, Detail: map[string]any{"background": a.Background, "keep": a.Keep, "sudo": a.Sudo}}
		},
		Summarize: func(_ sandbox.ExecArgs, r sandbox.ExecResult) map[string]any {
			if r.Running() != nil {
				return map[string]any{"status": r.Status, "command_id": r.ID, "streamed": true}
			}
			out := map[string]any{"status": r.Status, "duration_ms": r.DurationMS, "command_id": r.ID}
			if r.ExitCode != nil {
				out["exit_code"] = *r.ExitCode
			}
			if r.Reason != "" {
				out["reason"] = r.Reason
			}
			return out
		},
	})
}

func execRef(ctx context.Context, m *sandbox.Manager, c auth.Caller, ref sandbox.ExecRef) (*sandbox.Execution, error) {
	s, err := m.Resolve(ctx, c, ref.ID)
	if err != nil {
		return nil, err
	}
	return s.Execution(ref.CommandID)
}

func execReadTool(m *sandbox.Manager) dispatch.Tool {
	return dispatch.Define(sandbox.ToolExecRead, dispatch.Spec{Description: "Read an execution's status and output", Risk: guard.Safe, Roles: viewers},
		func(ctx context.Context, c auth.Caller, a sandbox.ExecRef) (*sandbox.Execution, error) {
			return execRef(ctx, m, c, a)
		},
		dispatch.Hooks[sandbox.ExecRef, *sandbox.Execution]{})
}

// execKillTool: killing one's own execution is safe: it only stops work,
// and must stay possible while the server is halted.
func execKillTool(m *sandbox.Manager) dispatch.Tool {
	return dispatch.Define(sandbox.ToolExecKill, dispatch.Spec{Description: "Kill an execution's process tree", Risk: guard.Safe},
		func(ctx context.Context, c auth.Caller, a sandbox.ExecRef) (sandbox.Result, error) {
			e, err := execRef(ctx, m, c, a)
			if err != nil {
				return sandbox.Result{}, err
			}
			e.Kill()
			<-e.Done()
			return e.Result(), nil
		}, dispatch.Hooks[sandbox.ExecRef, sandbox.Result]{})
}
