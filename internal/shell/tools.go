package shell

import (
	"context"
	"encoding/json"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Tool names.
var (
	ToolShellExec     = dispatch.Ref[ShellExecArgs, Result]("shell.exec")
	ToolShellView     = dispatch.Ref[ShellSessionArgs, ViewResult]("shell.view")
	ToolShellWait     = dispatch.Ref[ShellWaitArgs, StatusResult]("shell.wait")
	ToolShellWrite    = dispatch.Ref[ShellWriteArgs, StatusResult]("shell.write")
	ToolShellKill     = dispatch.Ref[ShellSessionArgs, KillResult]("shell.kill")
	ToolShellCreate   = dispatch.Ref[ShellCreateArgs, CreateResult]("shell.session_create")
	ToolShellUpdate   = dispatch.Ref[ShellUpdateArgs, UpdateResult]("shell.session_update")
	ToolShellDelete   = dispatch.Ref[ShellSessionArgs, Empty]("shell.session_delete")
	ToolShellDelAll   = dispatch.Ref[ListArgs, DeletedResult]("shell.session_delete_all")
	ToolShellList     = dispatch.Ref[ListArgs, SessionsResult]("shell.sessions")
	ToolShellStats    = dispatch.Ref[ListArgs, Stats]("shell.stats")
	ToolTerminal      = dispatch.Ref[TerminalArgs, *Terminal]("shell.terminal")
	ToolBashExec      = dispatch.Ref[BashExecArgs, BashExecResult]("bash.exec")
	ToolBashOutput    = dispatch.Ref[BashOutputArgs, BashOutputResult]("bash.output")
	ToolBashWrite     = dispatch.Ref[BashWriteArgs, BashWriteResult]("bash.write")
	ToolBashKill      = dispatch.Ref[BashKillArgs, BashCommandInfo]("bash.kill")
	ToolBashList      = dispatch.Ref[ListArgs, []BashInfo]("bash.sessions")
	ToolBashCreate    = dispatch.Ref[BashCreateArgs, BashInfo]("bash.session_create")
	ToolBashClose     = dispatch.Ref[BashSessionArgs, Empty]("bash.session_close")
	ToolSandboxDetail = dispatch.Ref[InfoArgs, SandboxInfo]("sandbox.info")
	ToolPackages      = dispatch.Ref[InfoArgs, json.RawMessage]("sandbox.packages")
)

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// Running is a shell command started for a streamed response.
type Running struct {
	Session  *Session
	cmd      *command
	truncate bool
}

// Output is the command's output so far.
func (r *Running) Output() *outbuf.Output { return r.cmd.out }

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

// Deps are what the shell, bash and sandbox-info tools work with.
type Deps struct {
	Service   *Service
	Sandboxes *sandbox.Manager
	// Guard rates commands as exec.run rates them.
	Guard   *guard.Guard
	Version string
}

// toolset holds Deps for the tool declarations below.
type toolset struct{ Deps }

// Tools declares the shell, terminal, bash pipe and sandbox-info tools.
// Their arguments are read the AIO way (unknown fields ignored): they are
// the bodies of AIO's routes.
func Tools(d Deps) []dispatch.Tool {
	t := toolset{d}
	return []dispatch.Tool{
		t.shellExec(), t.shellView(), t.shellWait(), t.shellWrite(), t.shellKill(),
		t.shellCreate(), t.shellUpdate(), t.shellDelete(), t.shellDeleteAll(),
		t.shellList(), t.shellStats(), t.terminal(),
		t.bashExec(), t.bashOutput(), t.bashWrite(), t.bashKill(), t.bashList(), t.bashCreate(), t.bashClose(),
		t.sandboxDetail(), t.packages(), t.inputTool(),
	}
}

// errOutsideCall: input is written only inside a dispatched call, which
// admits its lines.
var errOutsideCall = fault.New(fault.Internal, "input written outside a dispatched call")

// resolve returns the sandbox a call names ("" = the caller's default).
func (t toolset) resolve(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error) {
	// A viewer only observes: resolving would create a default sandbox
	// for it.
	if id == "" && c.Role == auth.RoleViewer {
		return nil, fault.New(fault.NotFound, "viewers have no default sandbox; name one with /sandboxes/{id}/v1/...")
	}
	return t.Sandboxes.Resolve(ctx, c, id)
}

// session returns a shell session the caller may see, marked as used.
func (t toolset) session(ctx context.Context, c auth.Caller, sbID, id string) (*Session, error) {
	sb, err := t.resolve(ctx, c, sbID)
	if err != nil {
		return nil, err
	}
	x, err := t.Service.Session(c, sb, id)
	if err != nil {
		return nil, err
	}
	x.touch()
	return x, nil
}

// assess rates a command line with the command guard.
func (t toolset) assess(cmd string) dispatch.Assessment { return t.assessIn(cmd, "") }

// assessIn rates cmd run in directory cwd (the policy's paths see cwd and
// the relative words resolved in it; "": the sandbox's /workspace).
func (t toolset) assessIn(cmd, cwd string) dispatch.Assessment {
	return sandbox.AssessCommand(t.Guard, sandbox.ExecRequest{Command: cmd, Cwd: cwd})
}

func target(sb, cmd string, detail map[string]any) dispatch.Target {
	return dispatch.Target{Target: cmd, Sandbox: sb, Detail: detail}
}

// aio is the Spec of a tool whose arguments are an AIO route's body.
func aio(desc string, risk guard.Risk, cat ratelimit.Category, roles []auth.Role) dispatch.Spec {
	return dispatch.Spec{Description: desc, Risk: risk, Category: cat, Roles: roles, Lenient: true}
}

// shellExec runs a command in a session; a caller that streams
// (dispatch.WithStreaming) gets the running command in Result.Running.
func (t toolset) shellExec() dispatch.Tool {
	spec := aio("Run a command in a PTY shell session that keeps its working directory and environment",
		guard.Safe, ratelimit.Exec, nil)
	spec.Streams = true
	// The command is typed into a running shell: its record is durable
	// before the run starts.
	spec.Commands = dispatch.RecordFirst
	return dispatch.Define(ToolShellExec, spec, func(ctx context.Context, c auth.Caller, a ShellExecArgs) (Result, error) {
		sb, err := t.resolve(ctx, c, a.Sandbox)
		if err != nil {
			return Result{}, err
		}
		x, err := t.Service.ExecSession(ctx, c, sb, str(a.ID))
		if err != nil {
			return Result{}, err
		}
		soft := a.timeout()
		noChange := a.noChange()
		if noChange == 0 {
			x.mu.Lock()
			noChange = x.noChange
			x.mu.Unlock()
		}
		truncate := a.Truncate == nil || *a.Truncate
		strict := a.Strict != nil && *a.Strict
		cmd, err := x.start(ExecOptions{Command: a.Command, Dir: str(a.ExecDir), Strict: strict, Truncate: truncate, Hard: a.hardTimeout()})
		if err != nil {
			return Result{}, err
		}
		if dispatch.Streaming(ctx) {
			r := x.result(cmd, StatusRunning, truncate)
			r.running = &Running{Session: x, cmd: cmd, truncate: truncate}
			return r, nil
		}
		if a.AsyncMode {
			return x.result(cmd, StatusRunning, truncate), nil
		}
		return x.result(cmd, x.await(ctx, cmd, soft, noChange, MaxWait), truncate), nil
	}, dispatch.Hooks[ShellExecArgs, Result]{
		Assess: func(a ShellExecArgs) dispatch.Assessment { return t.assess(a.Command) },
		Describe: func(a ShellExecArgs) dispatch.Target {
			return target(a.Sandbox, a.Command, map[string]any{"session": str(a.ID), "async": a.AsyncMode})
		},
		Summarize: func(_ ShellExecArgs, r Result) map[string]any {
			out := map[string]any{"status": r.Status, "session": r.SessionID}
			if r.ExitCode != nil {
				out["exit_code"] = *r.ExitCode
			}
			return out
		},
	})
}

func (t toolset) shellView() dispatch.Tool {
	return dispatch.Define(ToolShellView, aio("View a shell session's latest output", guard.Safe, 0, viewers),
		func(ctx context.Context, c auth.Caller, a ShellSessionArgs) (ViewResult, error) {
			x, err := t.session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return ViewResult{}, err
			}
			return x.view(), nil
		}, dispatch.Hooks[ShellSessionArgs, ViewResult]{Describe: describeSession})
}

func describeSession(a ShellSessionArgs) dispatch.Target { return target(a.Sandbox, a.ID, nil) }

func (t toolset) shellWait() dispatch.Tool {
	return dispatch.Define(ToolShellWait, aio("Wait for a shell session's command to finish", guard.Safe, 0, viewers),
		func(ctx context.Context, c auth.Caller, a ShellWaitArgs) (StatusResult, error) {
			x, err := t.session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return StatusResult{}, err
			}
			limit := wholeSeconds(a.Seconds)
			if limit == 0 {
				limit = wholeSeconds(a.MaxWaitSeconds)
			}
			cmd := x.current()
			if cmd == nil {
				return StatusResult{Status: StatusDone}, nil
			}
			x.mu.Lock()
			noChange := x.noChange
			x.mu.Unlock()
			return StatusResult{Status: x.await(ctx, cmd, limit, noChange, MaxWait)}, nil
		}, dispatch.Hooks[ShellWaitArgs, StatusResult]{
			Describe: func(a ShellWaitArgs) dispatch.Target { return target(a.Sandbox, a.ID, nil) },
		})
}

// shellWrite is Safe by itself: the lines its input completes are
// admitted (assessed, recorded) by shell.input before they are written.
func (t toolset) shellWrite() dispatch.Tool {
	return dispatch.Define(ToolShellWrite, aio("Write input to a shell session (its running program, or the shell itself)", guard.Safe, ratelimit.Exec, nil),
		func(ctx context.Context, c auth.Caller, a ShellWriteArgs) (StatusResult, error) {
			x, err := t.session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return StatusResult{}, err
			}
			in := a.Input
			if a.PressEnter {
				in += "\r"
			}
			d, dc, ok := dispatch.Within(ctx)
			if !ok {
				return StatusResult{}, errOutsideCall
			}
			to := inputTarget{sandbox: x.Sandbox, session: x.ID, via: ToolShellWrite.Name()}
			if err := typeInto(ctx, d, dc, &x.in, to, []byte(in), x.write); err != nil {
				return StatusResult{}, err
			}
			st := StatusDone
			if cmd := x.current(); cmd != nil {
				st = x.status(cmd)
			}
			return StatusResult{Status: st}, nil
		}, dispatch.Hooks[ShellWriteArgs, StatusResult]{
			Describe: func(a ShellWriteArgs) dispatch.Target {
				return target(a.Sandbox, a.Input, map[string]any{"session": a.ID})
			},
		})
}

// shellKill: stopping one's own work is safe (and must work while halted).
func (t toolset) shellKill() dispatch.Tool {
	return dispatch.Define(ToolShellKill, aio("Stop the command running in a shell session", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a ShellSessionArgs) (KillResult, error) {
			x, err := t.session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return KillResult{}, err
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
		}, dispatch.Hooks[ShellSessionArgs, KillResult]{Describe: describeSession})
}

func (t toolset) shellCreate() dispatch.Tool {
	return dispatch.Define(ToolShellCreate, aio("Start a shell session", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a ShellCreateArgs) (CreateResult, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return CreateResult{}, err
			}
			kind := KindExec
			if a.Terminal {
				kind = KindTerminal
			}
			x, err := t.Service.CreateSession(ctx, c, sb, a.ID, kind, str(a.ExecDir), wholeSeconds(a.NoChangeTimeout), 0, 0)
			if err != nil {
				return CreateResult{}, err
			}
			return CreateResult{SessionID: x.ID, WorkingDir: x.workingDir()}, nil
		}, dispatch.Hooks[ShellCreateArgs, CreateResult]{
			Describe: func(a ShellCreateArgs) dispatch.Target { return target(a.Sandbox, a.ID, nil) },
		})
}

// UpdateResult is shell.session_update's answer.
type UpdateResult struct {
	SessionID string `json:"session_id"`
}

func (t toolset) shellUpdate() dispatch.Tool {
	return dispatch.Define(ToolShellUpdate, aio("Change a shell session's no_change_timeout", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a ShellUpdateArgs) (UpdateResult, error) {
			x, err := t.session(ctx, c, a.Sandbox, a.ID)
			if err != nil {
				return UpdateResult{}, err
			}
			if nc := wholeSeconds(a.NoChangeTimeout); nc > 0 {
				x.mu.Lock()
				x.noChange = nc
				x.mu.Unlock()
			}
			return UpdateResult{SessionID: x.ID}, nil
		}, dispatch.Hooks[ShellUpdateArgs, UpdateResult]{
			Describe: func(a ShellUpdateArgs) dispatch.Target { return target(a.Sandbox, a.ID, nil) },
		})
}

// Empty is the answer of tools that answer nothing (JSON null).
type Empty = *struct{}

func (t toolset) shellDelete() dispatch.Tool {
	return dispatch.Define(ToolShellDelete, aio("End a shell session", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a ShellSessionArgs) (Empty, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			return nil, t.Service.DeleteSession(c, sb, a.ID)
		}, dispatch.Hooks[ShellSessionArgs, Empty]{Describe: describeSession})
}

// DeletedResult counts the sessions a call ended.
type DeletedResult struct {
	Deleted int `json:"deleted"`
}

func (t toolset) shellDeleteAll() dispatch.Tool {
	return dispatch.Define(ToolShellDelAll, aio("End every shell session of a sandbox", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a ListArgs) (DeletedResult, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return DeletedResult{}, err
			}
			return DeletedResult{Deleted: t.Service.DeleteAll(c, sb)}, nil
		}, dispatch.Hooks[ListArgs, DeletedResult]{
			Describe: func(a ListArgs) dispatch.Target { return target(a.Sandbox, "", nil) },
		})
}

// listOf is the sandbox a listing names; nil with All (every sandbox the
// caller may see).
func (t toolset) listOf(ctx context.Context, c auth.Caller, a ListArgs) (*sandbox.Sandbox, error) {
	if a.All {
		return nil, nil
	}
	return t.resolve(ctx, c, a.Sandbox)
}

func (t toolset) shellList() dispatch.Tool {
	return dispatch.Define(ToolShellList, aio("List shell sessions (sandbox, owner, status, idle time)", guard.Safe, 0, viewers),
		func(ctx context.Context, c auth.Caller, a ListArgs) (SessionsResult, error) {
			sb, err := t.listOf(ctx, c, a)
			if err != nil {
				return SessionsResult{}, err
			}
			out := SessionsResult{Sessions: map[string]Info{}}
			for _, in := range t.Service.List(c, sb) {
				out.Sessions[in.ID] = in
			}
			return out, nil
		}, dispatch.Hooks[ListArgs, SessionsResult]{})
}

func (t toolset) shellStats() dispatch.Tool {
	return dispatch.Define(ToolShellStats, aio("Shell session statistics", guard.Safe, 0, viewers),
		func(ctx context.Context, c auth.Caller, a ListArgs) (Stats, error) {
			sb, err := t.listOf(ctx, c, a)
			if err != nil {
				return Stats{}, err
			}
			return t.Service.Stats(c, sb), nil
		}, dispatch.Hooks[ListArgs, Stats]{})
}

// terminal: a live terminal runs whatever is typed, which the guard never
// sees: medium risk, and a concurrency slot per key.
func (t toolset) terminal() dispatch.Tool {
	return dispatch.Define(ToolTerminal, aio("Open a live terminal (WebSocket) on a new or existing shell session", guard.Medium, ratelimit.Terminal, nil),
		func(ctx context.Context, c auth.Caller, a TerminalArgs) (*Terminal, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			d, dc, ok := dispatch.Within(ctx)
			if !ok {
				return nil, errOutsideCall
			}
			tm, err := t.Service.OpenTerminal(ctx, c, sb, a.SessionID, uint16(a.Rows), uint16(a.Cols)) //nolint:gosec // G115: Validate bounds both by maxDimension
			if err != nil {
				return nil, err
			}
			// What the terminal's user types is admitted by shell.input
			// calls of the terminal's caller, line by line.
			x := tm.Session
			tm.input = func(ctx context.Context, b []byte) error {
				return typeInto(ctx, d, dc, &x.in, inputTarget{sandbox: x.Sandbox, session: x.ID, via: "terminal"}, b, x.write)
			}
			return tm, nil
		}, dispatch.Hooks[TerminalArgs, *Terminal]{
			Describe: func(a TerminalArgs) dispatch.Target {
				return target(a.Sandbox, a.SessionID, map[string]any{"reattach": a.SessionID != ""})
			},
			Summarize: func(_ TerminalArgs, tm *Terminal) map[string]any {
				if tm == nil {
					return nil
				}
				return map[string]any{"session": tm.Session.ID}
			},
		})
}

func (t toolset) sandboxDetail() dispatch.Tool {
	return dispatch.Define(ToolSandboxDetail, aio("Describe a sandbox's environment (OS, runtimes, tools)", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a InfoArgs) (SandboxInfo, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return SandboxInfo{}, err
			}
			return t.Service.Info(ctx, sb, t.Version)
		}, dispatch.Hooks[InfoArgs, SandboxInfo]{
			Describe: func(a InfoArgs) dispatch.Target { return target(a.Sandbox, "", nil) },
		})
}

func (t toolset) packages() dispatch.Tool {
	return dispatch.Define(ToolPackages, aio("List a sandbox's installed python or nodejs packages", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a InfoArgs) (json.RawMessage, error) {
			sb, err := t.resolve(ctx, c, a.Sandbox)
			if err != nil {
				return nil, err
			}
			return t.Service.Packages(ctx, sb, a.Language)
		}, dispatch.Hooks[InfoArgs, json.RawMessage]{
			Describe: func(a InfoArgs) dispatch.Target { return target(a.Sandbox, a.Language, nil) },
		})
}
