package shell

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/process"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Tool names.
const (
	ToolShellExec     = "shell.exec"
	ToolShellView     = "shell.view"
	ToolShellWait     = "shell.wait"
	ToolShellWrite    = "shell.write"
	ToolShellKill     = "shell.kill"
	ToolShellCreate   = "shell.session_create"
	ToolShellUpdate   = "shell.session_update"
	ToolShellDelete   = "shell.session_delete"
	ToolShellDelAll   = "shell.session_delete_all"
	ToolShellList     = "shell.sessions"
	ToolShellStats    = "shell.stats"
	ToolTerminal      = "shell.terminal"
	ToolBashExec      = "bash.exec"
	ToolBashOutput    = "bash.output"
	ToolBashWrite     = "bash.write"
	ToolBashKill      = "bash.kill"
	ToolBashList      = "bash.sessions"
	ToolBashCreate    = "bash.session_create"
	ToolBashClose     = "bash.session_close"
	ToolSandboxDetail = "sandbox.info"
	ToolPackages      = "sandbox.packages"
)

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// decoder decodes and checks JSON arguments (MCP, /v1/tools/call).
func decoder[T Checker]() func(json.RawMessage) (any, error) {
	return func(raw json.RawMessage) (any, error) {
		var v T
		if len(raw) == 0 {
			raw = json.RawMessage("{}")
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fault.InvalidField("arguments", "arguments do not match the tool's schema")
		}
		if err := v.Check(); err != nil {
			return nil, err
		}
		return v, nil
	}
}

// schema builds a small JSON schema from property names and types.
func schema(required []string, props ...string) json.RawMessage {
	p := map[string]any{"sandbox": map[string]string{"type": "string", "description": "sandbox id; default: the caller's default sandbox"}}
	for i := 0; i+1 < len(props); i += 2 {
		p[props[i]] = map[string]string{"type": props[i+1]}
	}
	s := map[string]any{"type": "object", "properties": p}
	if len(required) > 0 {
		s["required"] = required
	}
	b, _ := json.Marshal(s)
	return b
}

// Running is a shell command started for a streamed response.
type Running struct {
	Session  *Session
	cmd      *command
	truncate bool
}

// Output is the command's output so far.
func (r *Running) Output() *process.Output { return r.cmd.out }

// Done is closed when the command has finished.
func (r *Running) Done() <-chan struct{} { return r.cmd.done }

// Result reports the command.
func (r *Running) Result() Result {
	return r.Session.result(r.cmd, r.Session.status(r.cmd), r.truncate)
}

// ViewResult is AIO's ShellViewResult.
type ViewResult struct {
	Output    string          `json:"output"`
	SessionID string          `json:"session_id"`
	Console   []ConsoleRecord `json:"console"`
	Status    string          `json:"status"`
	Command   *string         `json:"command"`
	ExitCode  *int            `json:"exit_code"`
}

// StatusResult is AIO's ShellWaitResult and ShellWriteResult.
type StatusResult struct {
	Status string `json:"status"`
}

// KillResult is AIO's ShellKillResult.
type KillResult struct {
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	ReturnCode *int   `json:"returncode"`
}

// CreateResult is AIO's ShellCreateSessionResponse.
type CreateResult struct {
	SessionID  string `json:"session_id"`
	WorkingDir string `json:"working_dir"`
}

// SessionsResult is AIO's ActiveShellSessionsResult.
type SessionsResult struct {
	Sessions map[string]Info `json:"sessions"`
}

// BashExecResult is AIO's BashExecResult.
type BashExecResult struct {
	SessionID    string  `json:"session_id"`
	CommandID    string  `json:"command_id"`
	Command      string  `json:"command"`
	Status       string  `json:"status"`
	Stdout       *string `json:"stdout"`
	Stderr       *string `json:"stderr"`
	ExitCode     *int    `json:"exit_code"`
	Offset       int64   `json:"offset"`
	StderrOffset int64   `json:"stderr_offset"`
}

// BashCommandInfo is AIO's BashCommandInfo.
type BashCommandInfo struct {
	CommandID string `json:"command_id"`
	Command   string `json:"command"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code"`
}

// BashOutputResult is AIO's BashOutputResult; Dropped counts bytes
// before the returned data that are no longer kept.
type BashOutputResult struct {
	SessionID    string           `json:"session_id"`
	Stdout       string           `json:"stdout"`
	Stderr       string           `json:"stderr"`
	Offset       int64            `json:"offset"`
	StderrOffset int64            `json:"stderr_offset"`
	Command      *BashCommandInfo `json:"command"`
	Dropped      int64            `json:"dropped,omitempty"`
}

// maxOutputRead caps one /v1/bash/output read per stream.
const maxOutputRead = BashKeep

// RegisterTools adds the shell, terminal, bash pipe and sandbox-info tools
// to d. Commands are rated by the command guard as exec.run rates them.
func RegisterTools(d *dispatch.Dispatcher, svc *Service, m *sandbox.Manager, g *guard.Guard, version string) {
	resolve := func(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error) {
		// A viewer only observes: resolving would create a default sandbox
		// for it.
		if id == "" && c.Role == auth.RoleViewer {
			return nil, fault.New(fault.NotFound, "viewers have no default sandbox; name one with /sandboxes/{id}/v1/...")
		}
		return m.Resolve(ctx, c, id)
	}
	session := func(ctx context.Context, c auth.Caller, sbID, id string) (*Session, error) {
		sb, err := resolve(ctx, c, sbID)
		if err != nil {
			return nil, err
		}
		x, err := svc.Session(c, sb, id)
		if err != nil {
			return nil, err
		}
		x.touch()
		return x, nil
	}
	assess := func(cmd string) dispatch.Assessment {
		return sandbox.AssessCommand(g, sandbox.ExecRequest{Command: cmd})
	}
	target := func(sb, cmd string, detail map[string]any) dispatch.Target {
		return dispatch.Target{Target: cmd, Sandbox: sb, Detail: detail}
	}

	d.MustRegister(dispatch.Tool{
		Name: ToolShellExec, Description: "Run a command in a PTY shell session that keeps its working directory and environment",
		Risk: guard.Safe, Category: ratelimit.Exec,
		InputSchema: schema([]string{"command"}, "command", "string", "id", "string", "exec_dir", "string", "async_mode", "boolean",
			"timeout", "number", "no_change_timeout", "integer", "hard_timeout", "number", "strict", "boolean", "truncate", "boolean"),
		Decode: decoder[ShellExecArgs](),
		Assess: func(args any) dispatch.Assessment { return assess(args.(ShellExecArgs).Command) },
		Describe: func(args any) dispatch.Target {
			a := args.(ShellExecArgs)
			return target(a.Sandbox, a.Command, map[string]any{"session": str(a.ID), "async": a.AsyncMode})
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ShellExecArgs)
			sb, err := resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			var x *Session
			if str(a.ID) == "" {
				x, err = svc.createSession(ctx, c, sb, "", KindExec, "", 0, 0, 0, true)
			} else {
				x, err = svc.Session(c, sb, *a.ID)
			}
			if err != nil {
				return nil, err
			}
			soft, _ := seconds("timeout", a.Timeout, MaxWait)
			hard, _ := seconds("hard_timeout", a.HardTimeout, MaxWait)
			noChange, _ := intSeconds("no_change_timeout", a.NoChangeTimeout, MaxWait)
			if noChange == 0 {
				x.mu.Lock()
				noChange = x.noChange
				x.mu.Unlock()
			}
			truncate := a.Truncate == nil || *a.Truncate
			strict := a.Strict != nil && *a.Strict
			cmd, err := x.start(ExecOptions{Command: a.Command, Dir: str(a.ExecDir), Strict: strict, Truncate: truncate, Hard: hard})
			if err != nil {
				return nil, err
			}
			if a.Stream {
				return &Running{Session: x, cmd: cmd, truncate: truncate}, nil
			}
			if a.AsyncMode {
				return x.result(cmd, StatusRunning, truncate), nil
			}
			return x.result(cmd, x.await(ctx, cmd, soft, noChange, MaxWait), truncate), nil
		},
		Summarize: func(_, res any) map[string]any {
			if r, ok := res.(Result); ok {
				out := map[string]any{"status": r.Status, "session": r.SessionID}
				if r.ExitCode != nil {
					out["exit_code"] = *r.ExitCode
				}
				return out
			}
			return nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolShellView, Description: "View a shell session's latest output", Risk: guard.Safe, Roles: viewers,
		InputSchema: schema([]string{"id"}, "id", "string"), Decode: decoder[ShellSessionArgs](),
		Describe: func(args any) dispatch.Target { a := args.(ShellSessionArgs); return target(a.Sandbox, a.ID, nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ShellSessionArgs)
			x, err := session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return nil, err
			}
			return x.view(), nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolShellWait, Description: "Wait for a shell session's command to finish", Risk: guard.Safe, Roles: viewers,
		InputSchema: schema([]string{"id"}, "id", "string", "seconds", "integer", "max_wait_seconds", "integer"), Decode: decoder[ShellWaitArgs](),
		Describe: func(args any) dispatch.Target { a := args.(ShellWaitArgs); return target(a.Sandbox, a.ID, nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ShellWaitArgs)
			x, err := session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return nil, err
			}
			limit, _ := intSeconds("seconds", a.Seconds, MaxWait)
			if limit == 0 {
				limit, _ = intSeconds("max_wait_seconds", a.MaxWaitSeconds, MaxWait)
			}
			cmd := x.current()
			if cmd == nil {
				return StatusResult{Status: StatusDone}, nil
			}
			x.mu.Lock()
			noChange := x.noChange
			x.mu.Unlock()
			return StatusResult{Status: x.await(ctx, cmd, limit, noChange, MaxWait)}, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolShellWrite, Description: "Write input to a shell session (its running program, or the shell itself)",
		Risk: guard.Safe, Category: ratelimit.Exec,
		InputSchema: schema([]string{"id", "input"}, "id", "string", "input", "string", "press_enter", "boolean"), Decode: decoder[ShellWriteArgs](),
		// Input reaches the shell itself when no command runs: rate it as
		// a command line.
		Assess: func(args any) dispatch.Assessment { return assess(args.(ShellWriteArgs).Input) },
		Describe: func(args any) dispatch.Target {
			a := args.(ShellWriteArgs)
			return target(a.Sandbox, a.Input, map[string]any{"session": a.ID})
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ShellWriteArgs)
			x, err := session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return nil, err
			}
			in := a.Input
			if a.PressEnter {
				in += "\r"
			}
			if err := x.write([]byte(in)); err != nil {
				return nil, err
			}
			st := StatusDone
			if cmd := x.current(); cmd != nil {
				st = x.status(cmd)
			}
			return StatusResult{Status: st}, nil
		},
	})
	// Stopping one's own work is safe (and must work while halted).
	d.MustRegister(dispatch.Tool{
		Name: ToolShellKill, Description: "Stop the command running in a shell session", Risk: guard.Safe,
		InputSchema: schema([]string{"id"}, "id", "string"), Decode: decoder[ShellSessionArgs](),
		Describe: func(args any) dispatch.Target { a := args.(ShellSessionArgs); return target(a.Sandbox, a.ID, nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ShellSessionArgs)
			x, err := session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return nil, err
			}
			cmd := x.current()
			if cmd == nil {
				return KillResult{Status: StatusDone}, nil
			}
			x.stop(cmd, StatusKilled)
			select {
			case <-cmd.done:
			case <-ctx.Done():
			}
			r := x.result(cmd, x.status(cmd), true)
			return KillResult{Status: r.Status, ExitCode: r.ExitCode, ReturnCode: r.ExitCode}, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolShellCreate, Description: "Start a shell session", Risk: guard.Safe,
		InputSchema: schema(nil, "id", "string", "exec_dir", "string", "no_change_timeout", "integer"), Decode: decoder[ShellCreateArgs](),
		Describe: func(args any) dispatch.Target { a := args.(ShellCreateArgs); return target(a.Sandbox, a.ID, nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ShellCreateArgs)
			sb, err := resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			nc, _ := intSeconds("no_change_timeout", a.NoChangeTimeout, MaxWait)
			kind := KindExec
			if a.Terminal {
				kind = KindTerminal
			}
			x, err := svc.CreateSession(ctx, c, sb, a.ID, kind, str(a.ExecDir), nc, 0, 0)
			if err != nil {
				return nil, err
			}
			return CreateResult{SessionID: x.ID, WorkingDir: x.workingDir()}, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolShellUpdate, Description: "Change a shell session's no_change_timeout", Risk: guard.Safe,
		InputSchema: schema([]string{"id"}, "id", "string", "no_change_timeout", "integer"), Decode: decoder[ShellUpdateArgs](),
		Describe: func(args any) dispatch.Target { a := args.(ShellUpdateArgs); return target(a.Sandbox, a.ID, nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ShellUpdateArgs)
			x, err := session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return nil, err
			}
			if nc, _ := intSeconds("no_change_timeout", a.NoChangeTimeout, MaxWait); nc > 0 {
				x.mu.Lock()
				x.noChange = nc
				x.mu.Unlock()
			}
			return map[string]any{"session_id": x.ID}, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolShellDelete, Description: "End a shell session", Risk: guard.Safe,
		InputSchema: schema([]string{"id"}, "id", "string"), Decode: decoder[ShellSessionArgs](),
		Describe: func(args any) dispatch.Target { a := args.(ShellSessionArgs); return target(a.Sandbox, a.ID, nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ShellSessionArgs)
			sb, err := resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			return nil, svc.DeleteSession(c, sb, a.ID)
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolShellDelAll, Description: "End every shell session of a sandbox", Risk: guard.Safe,
		InputSchema: schema(nil), Decode: decoder[ListArgs](),
		Describe: func(args any) dispatch.Target { return target(args.(ListArgs).Sandbox, "", nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			sb, err := resolve(ctx, c, args.(ListArgs).Sandbox)
			if err != nil {
				return nil, err
			}
			return map[string]any{"deleted": svc.DeleteAll(c, sb)}, nil
		},
	})
	listOf := func(ctx context.Context, c auth.Caller, a ListArgs) (*sandbox.Sandbox, error) {
		if a.All {
			return nil, nil
		}
		return resolve(ctx, c, a.Sandbox)
	}
	d.MustRegister(dispatch.Tool{
		Name: ToolShellList, Description: "List shell sessions (sandbox, owner, status, idle time)", Risk: guard.Safe, Roles: viewers,
		InputSchema: schema(nil, "all", "boolean"), Decode: decoder[ListArgs](),
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			sb, err := listOf(ctx, c, args.(ListArgs))
			if err != nil {
				return nil, err
			}
			out := SessionsResult{Sessions: map[string]Info{}}
			for _, in := range svc.List(c, sb) {
				out.Sessions[in.ID] = in
			}
			return out, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolShellStats, Description: "Shell session statistics", Risk: guard.Safe, Roles: viewers,
		InputSchema: schema(nil, "all", "boolean"), Decode: decoder[ListArgs](),
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			sb, err := listOf(ctx, c, args.(ListArgs))
			if err != nil {
				return nil, err
			}
			return svc.Stats(c, sb), nil
		},
	})
	// A live terminal runs whatever is typed, which the guard never sees:
	// medium risk, and a concurrency slot per key.
	d.MustRegister(dispatch.Tool{
		Name: ToolTerminal, Description: "Open a live terminal (WebSocket) on a new or existing shell session",
		Risk: guard.Medium, Category: ratelimit.Terminal,
		InputSchema: schema(nil, "session_id", "string", "rows", "integer", "cols", "integer"), Decode: decoder[TerminalArgs](),
		Describe: func(args any) dispatch.Target {
			a := args.(TerminalArgs)
			return target(a.Sandbox, a.SessionID, map[string]any{"reattach": a.SessionID != ""})
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(TerminalArgs)
			sb, err := resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			return svc.OpenTerminal(ctx, c, sb, a.SessionID, uint16(a.Rows), uint16(a.Cols)) //nolint:gosec // G115: Check bounds both by maxDimension
		},
		Summarize: func(_, res any) map[string]any {
			if t, ok := res.(*Terminal); ok {
				return map[string]any{"session": t.Session.ID}
			}
			return nil
		},
	})

	registerBash(d, svc, resolve, assess, target)

	d.MustRegister(dispatch.Tool{
		Name: ToolSandboxDetail, Description: "Describe a sandbox's environment (OS, runtimes, tools)", Risk: guard.Safe,
		InputSchema: schema(nil), Decode: decoder[InfoArgs](),
		Describe: func(args any) dispatch.Target { return target(args.(InfoArgs).Sandbox, "", nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			sb, err := resolve(ctx, c, args.(InfoArgs).Sandbox)
			if err != nil {
				return nil, err
			}
			return svc.Info(ctx, sb, version)
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolPackages, Description: "List a sandbox's installed python or nodejs packages", Risk: guard.Safe,
		InputSchema: schema([]string{"language"}, "language", "string"), Decode: decoder[InfoArgs](),
		Describe: func(args any) dispatch.Target { a := args.(InfoArgs); return target(a.Sandbox, a.Language, nil) },
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(InfoArgs)
			sb, err := resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			return svc.Packages(ctx, sb, a.Language)
		},
	})
}

// view reports the session's latest command (AIO's view).
func (s *Session) view() ViewResult {
	cmd := s.current()
	if cmd == nil {
		text := cleanOutput(string(s.history(MaxOutputChars)))
		st := StatusDone
		s.mu.Lock()
		if s.terminated {
			st = StatusKilled
		}
		s.mu.Unlock()
		return ViewResult{Output: text, SessionID: s.ID, Status: st, Console: []ConsoleRecord{}}
	}
	r := s.result(cmd, s.status(cmd), true)
	text := ""
	if r.Output != nil {
		text = *r.Output
	}
	command := cmd.text
	return ViewResult{Output: text, SessionID: s.ID, Console: r.Console, Status: r.Status, Command: &command, ExitCode: r.ExitCode}
}

func registerBash(d *dispatch.Dispatcher, svc *Service, resolve func(context.Context, auth.Caller, string) (*sandbox.Sandbox, error),
	assess func(string) dispatch.Assessment, target func(string, string, map[string]any) dispatch.Target) {
	bashSession := func(ctx context.Context, c auth.Caller, sbID, id string) (*BashSession, error) {
		sb, err := resolve(ctx, c, sbID)
		if err != nil {
			return nil, err
		}
		return svc.Bash(c, sb, id)
	}
	d.MustRegister(dispatch.Tool{
		Name: ToolBashExec, Description: "Run a command as its own process (separate stdout/stderr, byte offsets)",
		Risk: guard.Safe, Category: ratelimit.Exec,
		InputSchema: schema([]string{"command"}, "command", "string", "session_id", "string", "exec_dir", "string", "env", "object",
			"async_mode", "boolean", "timeout", "number", "hard_timeout", "number", "max_output_length", "integer"),
		Decode: decoder[BashExecArgs](),
		Assess: func(args any) dispatch.Assessment { return assess(args.(BashExecArgs).Command) },
		Describe: func(args any) dispatch.Target {
			a := args.(BashExecArgs)
			return target(a.Sandbox, a.Command, map[string]any{"session": str(a.SessionID), "async": a.AsyncMode})
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(BashExecArgs)
			sb, err := resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			var b *BashSession
			if str(a.SessionID) == "" {
				b, err = svc.CreateBash(c, sb, "", str(a.ExecDir))
			} else {
				b, err = svc.Bash(c, sb, *a.SessionID)
			}
			if err != nil {
				return nil, err
			}
			soft, _ := seconds("timeout", a.Timeout, MaxWait)
			hard, _ := seconds("hard_timeout", a.HardTimeout, MaxWait)
			cmd, err := b.run(ctx, sb, BashRun{Command: a.Command, Dir: str(a.ExecDir), Env: a.Env, Hard: hard, Privileged: c.IsAdmin()})
			if err != nil {
				return nil, err
			}
			limit := DefaultMaxOutput
			if a.MaxOutputLength != nil {
				limit = *a.MaxOutputLength
			}
			if !a.AsyncMode {
				if soft <= 0 {
					soft = MaxWait
				}
				t := time.NewTimer(soft)
				select {
				case <-cmd.done:
				case <-t.C:
				case <-ctx.Done():
				}
				t.Stop()
			}
			res := BashExecResult{SessionID: b.ID, CommandID: cmd.ID, Command: cmd.Command, Status: cmd.Status(), ExitCode: cmd.ExitCode(),
				Offset: cmd.Stdout.Total(), StderrOffset: cmd.Stderr.Total()}
			if !a.AsyncMode {
				out, _ := cmd.Stdout.Text()
				errOut, _ := cmd.Stderr.Text()
				out = truncateMiddle(strings.ToValidUTF8(out, "\uFFFD"), limit)
				errOut = truncateMiddle(strings.ToValidUTF8(errOut, "\uFFFD"), limit)
				res.Stdout, res.Stderr = &out, &errOut
			}
			return res, nil
		},
		Summarize: func(_, res any) map[string]any {
			if r, ok := res.(BashExecResult); ok {
				out := map[string]any{"status": r.Status, "command_id": r.CommandID, "session": r.SessionID}
				if r.ExitCode != nil {
					out["exit_code"] = *r.ExitCode
				}
				return out
			}
			return nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolBashOutput, Description: "Read a command's output from byte offsets, optionally waiting for more", Risk: guard.Safe, Roles: viewers,
		InputSchema: schema([]string{"session_id"}, "session_id", "string", "command_id", "string", "offset", "integer",
			"stderr_offset", "integer", "wait", "boolean", "wait_timeout", "number"),
		Decode: decoder[BashOutputArgs](),
		Describe: func(args any) dispatch.Target {
			a := args.(BashOutputArgs)
			return target(a.Sandbox, str(a.CommandID), nil)
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(BashOutputArgs)
			b, err := bashSession(ctx, c, a.Sandbox, a.SessionID)
			if err != nil {
				return nil, err
			}
			cmd, err := b.command(str(a.CommandID))
			if err != nil {
				if fault.Is(err, fault.NotFound) && str(a.CommandID) == "" {
					return BashOutputResult{SessionID: b.ID, Offset: a.Offset, StderrOffset: a.StderrOffset}, nil
				}
				return nil, err
			}
			if a.Wait {
				wait := 30 * time.Second
				if a.WaitTimeout != nil {
					wait, _ = seconds("wait_timeout", a.WaitTimeout, MaxWait)
				}
				outCh, _ := cmd.Stdout.Wait()
				errCh, _ := cmd.Stderr.Wait()
				if cmd.Stdout.Total() <= a.Offset && cmd.Stderr.Total() <= a.StderrOffset {
					t := time.NewTimer(wait)
					select {
					case <-cmd.done:
					case <-outCh:
					case <-errCh:
					case <-ctx.Done():
					case <-t.C:
					}
					t.Stop()
				}
			}
			out, next, d1 := cmd.Stdout.ReadAt(a.Offset, maxOutputRead)
			errOut, nextErr, d2 := cmd.Stderr.ReadAt(a.StderrOffset, maxOutputRead)
			return BashOutputResult{SessionID: b.ID, Stdout: string(out), Stderr: string(errOut), Offset: next, StderrOffset: nextErr,
				Dropped: d1 + d2, Command: &BashCommandInfo{CommandID: cmd.ID, Command: cmd.Command, Status: cmd.Status(), ExitCode: cmd.ExitCode()}}, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolBashWrite, Description: "Write to a running command's stdin", Risk: guard.Medium,
		InputSchema: schema([]string{"session_id", "input"}, "session_id", "string", "command_id", "string", "input", "string"),
		Decode:      decoder[BashWriteArgs](),
		Describe: func(args any) dispatch.Target {
			a := args.(BashWriteArgs)
			return target(a.Sandbox, str(a.CommandID), map[string]any{"session": a.SessionID, "bytes": len(a.Input)})
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(BashWriteArgs)
			b, err := bashSession(ctx, c, a.Sandbox, a.SessionID)
			if err != nil {
				return nil, err
			}
			cmd, err := b.command(str(a.CommandID))
			if err != nil {
				return nil, err
			}
			if err := cmd.WriteStdin([]byte(a.Input)); err != nil {
				return nil, err
			}
			return map[string]any{"command_id": cmd.ID, "bytes_written": len(a.Input)}, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolBashKill, Description: "Signal a session's current (or a given) command", Risk: guard.Safe,
		InputSchema: schema([]string{"session_id"}, "session_id", "string", "command_id", "string", "signal", "string"),
		Decode:      decoder[BashKillArgs](),
		Describe: func(args any) dispatch.Target {
			a := args.(BashKillArgs)
			return target(a.Sandbox, str(a.CommandID), map[string]any{"session": a.SessionID, "signal": a.Signal})
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(BashKillArgs)
			b, err := bashSession(ctx, c, a.Sandbox, a.SessionID)
			if err != nil {
				return nil, err
			}
			cmd, err := b.command(str(a.CommandID))
			if err != nil {
				return nil, err
			}
			sig := signals[strings.ToUpper(a.Signal)]
			cmd.Signal(sig)
			// Give the process a moment to act on the signal so the answer
			// usually carries the outcome.
			t := time.NewTimer(2 * time.Second)
			select {
			case <-cmd.done:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			return BashCommandInfo{CommandID: cmd.ID, Command: cmd.Command, Status: cmd.Status(), ExitCode: cmd.ExitCode()}, nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolBashList, Description: "List bash sessions", Risk: guard.Safe, Roles: viewers,
		InputSchema: schema(nil), Decode: decoder[ListArgs](),
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			sb, err := resolve(ctx, c, args.(ListArgs).Sandbox)
			if err != nil {
				return nil, err
			}
			return svc.ListBash(c, sb), nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolBashCreate, Description: "Create a bash session (a default working directory for its commands)", Risk: guard.Safe,
		InputSchema: schema(nil, "session_id", "string", "exec_dir", "string"), Decode: decoder[BashCreateArgs](),
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(BashCreateArgs)
			sb, err := resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			b, err := svc.CreateBash(c, sb, str(a.SessionID), str(a.ExecDir))
			if err != nil {
				return nil, err
			}
			return b.Info(), nil
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolBashClose, Description: "Close a bash session and kill its commands", Risk: guard.Safe,
		InputSchema: schema([]string{"session_id"}, "session_id", "string"), Decode: decoder[BashSessionArgs](),
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(BashSessionArgs)
			sb, err := resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			return nil, svc.CloseBash(c, sb, a.SessionID)
		},
	})
}
