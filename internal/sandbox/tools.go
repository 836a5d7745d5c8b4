package sandbox

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names of the sandbox capabilities.
const (
	ToolCreate    = "sandbox.create"
	ToolList      = "sandbox.list"
	ToolGet       = "sandbox.get"
	ToolDelete    = "sandbox.delete"
	ToolPause     = "sandbox.pause"
	ToolResume    = "sandbox.resume"
	ToolExec      = "exec.run"
	ToolExecRead  = "exec.read"
	ToolExecKill  = "exec.kill"
	ToolResources = "sandbox.resources"
)

// CallerOf maps an authenticated key to the manager's view: admins act on
// every sandbox, viewers observe every sandbox (their tools are read-only),
// agents see their own.
func CallerOf(c auth.Caller) Caller {
	return Caller{KeyID: c.KeyID, Admin: c.IsAdmin() || c.Role == auth.RoleViewer}
}

// IDArgs names a sandbox.
type IDArgs struct {
	ID string `json:"id"`
}

// ExecArgs runs a command in sandbox ID (the caller's default sandbox when
// ID is empty).
type ExecArgs struct {
	ID  string      `json:"id,omitempty"`
	Req ExecRequest `json:"-"`
	// Stream starts the execution in the background and returns it, for a
	// caller that streams its output and kills it when the client goes.
	Stream bool `json:"-"`
}

// ExecRef names an execution.
type ExecRef struct {
	ID        string `json:"id"`
	CommandID string `json:"command_id"`
}

var (
	viewers  = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}
	idSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)
)

func decode[T any](raw json.RawMessage) (any, error) {
	var v T
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fault.InvalidField("arguments", "arguments do not match the tool's schema: "+err.Error())
	}
	return v, nil
}

// Resolve returns the sandbox a call names: ID, or the caller's default
// sandbox (created on first use) when ID is empty.
func (m *Manager) Resolve(ctx context.Context, c auth.Caller, id string) (*Sandbox, error) {
	if id == "" {
		return m.Default(ctx, Caller{KeyID: c.KeyID})
	}
	return m.Get(CallerOf(c), id)
}

// RegisterTools adds the sandbox capabilities to d. The guard rates
// commands.
func RegisterTools(d *dispatch.Dispatcher, m *Manager, g *guard.Guard) {
	d.MustRegister(dispatch.Tool{
		Name: ToolCreate, Description: "Create a sandbox", Risk: guard.Medium,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"limits":{"type":"object"},"network":{"type":"object"},"ttl":{"type":"string"}}}`),
		Decode:      decode[Spec],
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			return m.Create(ctx, CallerOf(c), args.(Spec))
		},
		Summarize: func(_, res any) map[string]any {
			in := res.(Info)
			return map[string]any{"sandbox": in.ID}
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolList, Description: "List sandboxes", Risk: guard.Safe, Roles: viewers,
		Run: func(_ context.Context, c auth.Caller, _ any) (any, error) { return m.List(CallerOf(c)), nil },
	})
	byID := func(name, desc string, risk guard.Risk, roles []auth.Role, run func(ctx context.Context, c auth.Caller, id string) (any, error)) {
		d.MustRegister(dispatch.Tool{
			Name: name, Description: desc, Risk: risk, Roles: roles, InputSchema: idSchema, Decode: decode[IDArgs],
			Describe: func(args any) dispatch.Target { return dispatch.Target{Sandbox: args.(IDArgs).ID} },
			Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
				return run(ctx, c, args.(IDArgs).ID)
			},
		})
	}
	byID(ToolGet, "Get a sandbox", guard.Safe, viewers, func(_ context.Context, c auth.Caller, id string) (any, error) {
		s, err := m.Get(CallerOf(c), id)
		if err != nil {
			return nil, err
		}
		return s.Info(), nil
	})
	byID(ToolDelete, "Delete a sandbox and its workspace", guard.Medium, nil, func(ctx context.Context, c auth.Caller, id string) (any, error) {
		return nil, m.Delete(ctx, Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, id)
	})
	byID(ToolPause, "Freeze a sandbox", guard.Medium, nil, func(ctx context.Context, c auth.Caller, id string) (any, error) {
		return nil, m.Pause(ctx, Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, id)
	})
	// Resume is safe: it only undoes a pause (and HALT keeps its own
	// freeze: see HaltFreeze).
	byID(ToolResume, "Thaw a paused sandbox", guard.Medium, nil, func(ctx context.Context, c auth.Caller, id string) (any, error) {
		return nil, m.Resume(ctx, Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, id)
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolResources, Description: "Live cgroup figures per sandbox", Risk: guard.Safe, Roles: viewers,
		Run: func(_ context.Context, c auth.Caller, _ any) (any, error) { return m.Resources(CallerOf(c)), nil },
	})

	d.MustRegister(dispatch.Tool{
		Name: ToolExec, Description: "Run a command in a sandbox", Risk: guard.Safe, Category: ratelimit.Exec,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"command":{"type":"string"},"argv":{"type":"array","items":{"type":"string"}},"cwd":{"type":"string"},"env":{"type":"object"},"timeout":{"type":"number"}}}`),
		Decode:      decodeExec,
		Assess: func(args any) dispatch.Assessment {
			return assessCommand(g, args.(ExecArgs).Req)
		},
		Describe: func(args any) dispatch.Target {
			a := args.(ExecArgs)
			cmd := a.Req.Command
			if cmd == "" {
				cmd = strings.Join(a.Req.Argv, " ")
			}
			return dispatch.Target{Target: cmd, Sandbox: a.ID, Detail: map[string]any{"background": a.Req.Background, "sudo": a.Req.Sudo}}
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ExecArgs)
			s, err := m.Resolve(ctx, c, a.ID)
			if err != nil {
				return nil, err
			}
			a.Req.Actor = c.KeyID
			a.Req.PrivilegedEnv = c.IsAdmin()
			if a.Stream {
				a.Req.Background = true
			}
			e, err := s.Exec(ctx, a.Req)
			if err != nil {
				return nil, err
			}
			if a.Stream {
				return e, nil
			}
			return e.Result(), nil
		},
		Summarize: func(_, res any) map[string]any {
			r, ok := res.(Result)
			if !ok {
				return nil
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
	execRef := func(ctx context.Context, c auth.Caller, ref ExecRef) (*Execution, error) {
		s, err := m.Resolve(ctx, c, ref.ID)
		if err != nil {
			return nil, err
		}
		return s.Execution(ref.CommandID)
	}
	d.MustRegister(dispatch.Tool{
		Name: ToolExecRead, Description: "Read an execution's status and output", Risk: guard.Safe, Roles: viewers,
		Decode: decode[ExecRef],
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			return execRef(ctx, c, args.(ExecRef))
		},
	})
	// Killing one's own execution is safe: it only stops work, and must
	// stay possible while the server is halted.
	d.MustRegister(dispatch.Tool{
		Name: ToolExecKill, Description: "Kill an execution's process tree", Risk: guard.Safe,
		Decode: decode[ExecRef],
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			e, err := execRef(ctx, c, args.(ExecRef))
			if err != nil {
				return nil, err
			}
			e.Kill()
			<-e.Done()
			return e.Result(), nil
		},
	})
}

// execJSON is exec.run's JSON argument shape (MCP, /v1/tools/call).
type execJSON struct {
	ID         string            `json:"id"`
	Command    string            `json:"command"`
	Argv       []string          `json:"argv"`
	Cwd        string            `json:"cwd"`
	Env        map[string]string `json:"env"`
	Timeout    float64           `json:"timeout"`
	Stdin      string            `json:"stdin"`
	Background bool              `json:"background"`
	Sudo       bool              `json:"sudo"`
}

func decodeExec(raw json.RawMessage) (any, error) {
	v, err := decode[execJSON](raw)
	if err != nil {
		return nil, err
	}
	j := v.(execJSON)
	r := ExecRequest{Command: j.Command, Argv: j.Argv, Cwd: j.Cwd, Env: j.Env, Stdin: []byte(j.Stdin), Background: j.Background, Sudo: j.Sudo}
	if j.Timeout < 0 || j.Timeout > MaxTimeout.Seconds() {
		return nil, fault.InvalidField("timeout", "timeout out of range")
	}
	r.Timeout = secondsToDuration(j.Timeout)
	return ExecArgs{ID: j.ID, Req: r}, nil
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
