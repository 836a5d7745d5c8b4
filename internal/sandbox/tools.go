package sandbox

import (
	"cmp"
	"context"
	"math"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/sandbox/execrun"
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
// (execrun.CheckTimeout) lives here for every caller of exec.run.
func (a ExecArgs) Validate() error {
	if a.Timeout == nil {
		return nil
	}
	t := *a.Timeout
	if math.IsNaN(t) || math.IsInf(t, 0) {
		return execrun.ErrTimeout
	}
	return execrun.CheckTimeout(secondsToDuration(t))
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

// Streamed is exec.run's answer to a caller that streams: the execution
// running (Running), its id and status.
func Streamed(e *Execution) ExecResult {
	return ExecResult{Result: Result{ID: e.ID, Status: e.Status()}, running: e}
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
	return m.Lookup(ctx, CallerOf(c), id)
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
