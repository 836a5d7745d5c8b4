package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names of the sandbox capabilities.
var (
	ToolCreate    = dispatch.Ref[Spec, Info]("sandbox.create")
	ToolList      = dispatch.Ref[NoArgs, []Info]("sandbox.list")
	ToolGet       = dispatch.Ref[IDArgs, Info]("sandbox.get")
	ToolDelete    = dispatch.Ref[IDArgs, Empty]("sandbox.delete")
	ToolPause     = dispatch.Ref[IDArgs, Empty]("sandbox.pause")
	ToolResume    = dispatch.Ref[IDArgs, Empty]("sandbox.resume")
	ToolExec      = dispatch.Ref[ExecArgs, ExecResult]("exec.run")
	ToolExecRead  = dispatch.Ref[ExecRef, *Execution]("exec.read")
	ToolExecKill  = dispatch.Ref[ExecRef, Result]("exec.kill")
	ToolResources = dispatch.Ref[NoArgs, []Stats]("sandbox.resources")
)

// CallerOf maps an authenticated key to the manager's view: admins act on
// every sandbox, viewers observe every sandbox (their tools are read-only),
// agents see their own.
func CallerOf(c auth.Caller) Caller {
	return Caller{KeyID: c.KeyID, Admin: c.IsAdmin() || c.Role == auth.RoleViewer}
}

// IDArgs names a sandbox.
type IDArgs struct {
	ID string `json:"id" required:"true"`
}

// ExecArgs is exec.run's arguments: a command for sandbox ID (the
// caller's default sandbox when ID is empty). Its JSON is the body of
// POST /v1/sandboxes/{id}/exec plus id. A caller that streams
// (dispatch.WithStreaming) gets the running Execution (ExecResult.Running).
type ExecArgs struct {
	ID          string            `json:"id,omitempty" doc:"sandbox id; empty: the caller's default sandbox"`
	Command     string            `json:"command,omitempty" doc:"run with /bin/bash -c"`
	Argv        []string          `json:"argv,omitempty" doc:"run as is (instead of command)"`
	Cwd         string            `json:"cwd,omitempty" doc:"absolute path inside the sandbox; default /workspace"`
	Env         map[string]string `json:"env,omitempty"`
	Timeout     *float64          `json:"timeout,omitempty" doc:"wall timeout in seconds (default 60, max 600; a background command in a sandbox with a ttl has none unless given: the ttl bounds it)"`
	Stdin       string            `json:"stdin,omitempty"`
	Background  bool              `json:"background,omitempty" doc:"return a command_id at once"`
	Keep        bool              `json:"keep,omitempty" doc:"let processes the command leaves running (nohup server &) outlive it; without keep the end of the command kills them"`
	Sudo        bool              `json:"sudo,omitempty" doc:"uid 0 inside the sandbox (needs SANDBOX_ENABLE_SUDO)"`
	OutputLimit int               `json:"output_limit,omitempty" doc:"bytes kept per stream (default 50000)"`
}

// Validate implements dispatch.Validator: the timeout's rule
// (CheckTimeout) lives here for every caller of exec.run.
func (a ExecArgs) Validate() error {
	if a.Timeout == nil {
		return nil
	}
	t := *a.Timeout
	if math.IsNaN(t) || math.IsInf(t, 0) {
		return errTimeout
	}
	return CheckTimeout(secondsToDuration(t))
}

var errTimeout = fault.InvalidField("timeout", fmt.Sprintf("timeout must be a number of seconds in (0, %d]", int(MaxTimeout.Seconds())))

// CheckTimeout is the one rule of an execution's wall timeout: above zero
// and at most MaxTimeout. exec.run's arguments are checked with it, and
// Sandbox.Exec applies it again for callers that do not come through the
// dispatcher.
func CheckTimeout(d time.Duration) error {
	if d <= 0 || d > MaxTimeout {
		return errTimeout
	}
	return nil
}

// Request is the ExecRequest a's fields describe.
func (a ExecArgs) Request() ExecRequest {
	r := ExecRequest{Command: a.Command, Argv: a.Argv, Cwd: a.Cwd, Env: a.Env, Stdin: []byte(a.Stdin),
		Background: a.Background, Keep: a.Keep, Sudo: a.Sudo, OutputLimit: a.OutputLimit}
	if a.Timeout != nil {
		r.Timeout = secondsToDuration(*a.Timeout)
	}
	return r
}

// ExecResult is exec.run's answer: the execution's Result, and the
// running Execution for a caller that streams.
type ExecResult struct {
	Result
	running *Execution
}

// Running is the execution, still running, when the caller streams
// (dispatch.WithStreaming); nil otherwise.
func (r ExecResult) Running() *Execution { return r.running }

// ExecRef names an execution.
type ExecRef struct {
	ID        string `json:"id" doc:"sandbox id; empty: the caller's default sandbox"`
	CommandID string `json:"command_id" required:"true"`
}

// NoArgs is the arguments of a tool that takes none.
type NoArgs struct{}

// Empty is the answer of a tool that answers nothing (JSON null).
type Empty = *struct{}

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// Resolve returns the sandbox a call names: ID, else the request's scope
// (WithScope), else the caller's default sandbox — created on first use by
// a call of its own, sandbox.create_default (implicit.go).
func (m *Manager) Resolve(ctx context.Context, c auth.Caller, id string) (*Sandbox, error) {
	if id == "" {
		id = ScopeFrom(ctx)
	}
	if id == "" {
		return m.resolveDefault(ctx, c)
	}
	return m.lookup(ctx, CallerOf(c), id)
}

// Tools declares the sandbox capabilities; the guard rates commands.
// Arguments are read strictly (an unknown field is refused).
func Tools(m *Manager, g *guard.Guard) []dispatch.Tool {
	return append([]dispatch.Tool{
		createTool(m), listTool(m),
		byID(ToolGet, "Get a sandbox", guard.Safe, viewers, func(ctx context.Context, c auth.Caller, id string) (Info, error) {
			s, err := m.lookup(ctx, CallerOf(c), id)
			if err != nil {
				return Info{}, err
			}
			return s.Info(), nil
		}),
		byID(ToolDelete, "Delete a sandbox and its workspace", guard.Medium, nil, onSandbox(m.Delete)),
		byID(ToolPause, "Freeze a sandbox", guard.Medium, nil, onSandbox(m.Pause)),
		// Resume only undoes a pause (and HALT keeps its own freeze: see
		// HaltFreeze).
		byID(ToolResume, "Thaw a paused sandbox", guard.Medium, nil, onSandbox(m.Resume)),
		resourcesTool(m), execTool(m, g), execReadTool(m), execKillTool(m),
		createDefaultTool(m), startTool(m), adoptTool(m),
	}, snapshotTools(m)...)
}

func createTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolCreate, dispatch.Spec{Description: "Create a sandbox", Risk: guard.Medium},
		func(ctx context.Context, c auth.Caller, spec Spec) (Info, error) {
			return m.Create(ctx, CallerOf(c), spec)
		}, dispatch.Hooks[Spec, Info]{
			// The template it uses, for the policy's template rules.
			Assess: func(s Spec) dispatch.Assessment {
				return dispatch.Assessment{Risk: guard.Medium, Templates: []string{TemplateName(s.Template)}}
			},
			Summarize: func(_ Spec, in Info) map[string]any {
				out := map[string]any{"sandbox": in.ID}
				if in.TemplateDigest != "" {
					out["template"], out["template_digest"] = in.Template, in.TemplateDigest
				}
				if in.Snapshot != "" {
					out["snapshot"] = in.Snapshot
					m.snapshotAudit(out, "snapshot_digest", in.Snapshot)
				}
				return out
			},
		})
}

func listTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolList, dispatch.Spec{Description: "List sandboxes", Risk: guard.Safe, Roles: viewers},
		func(_ context.Context, c auth.Caller, _ NoArgs) ([]Info, error) { return m.List(CallerOf(c)), nil },
		dispatch.Hooks[NoArgs, []Info]{})
}

func resourcesTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolResources, dispatch.Spec{Description: "Live cgroup figures per sandbox", Risk: guard.Safe, Roles: viewers},
		func(_ context.Context, c auth.Caller, _ NoArgs) ([]Stats, error) {
			return m.Resources(CallerOf(c)), nil
		},
		dispatch.Hooks[NoArgs, []Stats]{})
}

// onSandbox is the run of a byID tool that acts on the caller's own
// sandbox (an admin's: any).
func onSandbox(run func(context.Context, Caller, string) error) func(context.Context, auth.Caller, string) (Empty, error) {
	return func(ctx context.Context, c auth.Caller, id string) (Empty, error) {
		return nil, run(ctx, Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, id)
	}
}

// byID declares a tool whose one argument names a sandbox.
func byID[R any](name dispatch.Ref[IDArgs, R], desc string, risk guard.Risk, roles []auth.Role, run func(context.Context, auth.Caller, string) (R, error)) dispatch.Tool {
	return dispatch.Define(name, dispatch.Spec{Description: desc, Risk: risk, Roles: roles},
		func(ctx context.Context, c auth.Caller, a IDArgs) (R, error) { return run(ctx, c, a.ID) },
		dispatch.Hooks[IDArgs, R]{Describe: func(a IDArgs) dispatch.Target { return dispatch.Target{Sandbox: a.ID} }})
}

func execTool(m *Manager, g *guard.Guard) dispatch.Tool {
	// The command is held in the init until the call's record is durable
	// (Exec, spawnIn): the record's sync runs beside its start.
	spec := dispatch.Spec{Description: "Run a command in a sandbox", Risk: guard.Safe, Category: ratelimit.Exec, Streams: true,
		Commands: dispatch.HeldCommand}
	return dispatch.Define(ToolExec, spec, func(ctx context.Context, c auth.Caller, a ExecArgs) (ExecResult, error) {
		s, err := m.Resolve(ctx, c, a.ID)
		if err != nil {
			return ExecResult{}, err
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
			return ExecResult{}, err
		}
		if stream {
			return ExecResult{Result: Result{ID: e.ID, Status: e.Status()}, running: e}, nil
		}
		return ExecResult{Result: e.Result()}, nil
	}, dispatch.Hooks[ExecArgs, ExecResult]{
		Assess: func(a ExecArgs) dispatch.Assessment { return assessCommand(g, a.Request()) },
		Describe: func(a ExecArgs) dispatch.Target {
			cmd := a.Command
			if cmd == "" {
				cmd = strings.Join(a.Argv, " ")
			}
			return dispatch.Target{Target: cmd, Sandbox: a.ID, Detail: map[string]any{"background": a.Background, "keep": a.Keep, "sudo": a.Sudo}}
		},
		Summarize: func(_ ExecArgs, r ExecResult) map[string]any {
			if r.running != nil {
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

func execRef(ctx context.Context, m *Manager, c auth.Caller, ref ExecRef) (*Execution, error) {
	s, err := m.Resolve(ctx, c, ref.ID)
	if err != nil {
		return nil, err
	}
	return s.Execution(ref.CommandID)
}

func execReadTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolExecRead, dispatch.Spec{Description: "Read an execution's status and output", Risk: guard.Safe, Roles: viewers},
		func(ctx context.Context, c auth.Caller, a ExecRef) (*Execution, error) { return execRef(ctx, m, c, a) },
		dispatch.Hooks[ExecRef, *Execution]{})
}

// execKillTool: killing one's own execution is safe: it only stops work,
// and must stay possible while the server is halted.
func execKillTool(m *Manager) dispatch.Tool {
	return dispatch.Define(ToolExecKill, dispatch.Spec{Description: "Kill an execution's process tree", Risk: guard.Safe},
		func(ctx context.Context, c auth.Caller, a ExecRef) (Result, error) {
			e, err := execRef(ctx, m, c, a)
			if err != nil {
				return Result{}, err
			}
			e.Kill()
			<-e.Done()
			return e.Result(), nil
		}, dispatch.Hooks[ExecRef, Result]{})
}

// assessCommand rates a command with the guard: a command line as is, an
// argv as the shell-quoted line it is equivalent to.
func assessCommand(g *guard.Guard, r ExecRequest) dispatch.Assessment {
	line := r.Command
	if line == "" {
		q := make([]string, len(r.Argv))
		for i, a := range r.Argv {
			q[i] = shellQuote(a)
		}
		line = strings.Join(q, " ")
	}
	v := g.Classify(line)
	a := dispatch.FromVerdict(v)
	// The directory it runs in is a path it touches, and relative words
	// name files there (policy paths: `cat hostname` with cwd /etc).
	a.Paths = guard.InDir(a.Paths, cmp.Or(r.Cwd, "/workspace"))
	if r.Sudo {
		a.Risk = max(a.Risk, guard.Dangerous)
		a.Reasons = append(a.Reasons, "runs as root inside the sandbox")
	}
	return a
}

func shellQuote(s string) string {
	plain := func(r rune) bool {
		return r == '/' || r == '.' || r == '-' || r == '_' || r == '=' || r == ':' || r == ',' || r == '+' ||
			r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !plain(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func secondsToDuration(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }
