package coderun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names of the code capabilities.
var (
	ToolExecute       = dispatch.Ref[ExecuteArgs, Result]("code.execute")
	ToolInfo          = dispatch.Ref[SandboxArgs, []LanguageInfo]("code.info")
	ToolSessions      = dispatch.Ref[SandboxArgs, []SessionInfo]("code.sessions")
	ToolSessionCreate = dispatch.Ref[SandboxArgs, SessionInfo]("code.session.create")
	ToolSessionDelete = dispatch.Ref[SandboxArgs, int]("code.session.delete")
)

// ExecuteArgs is code.execute's arguments: the code to run and how, in
// sandbox Sandbox ("" = the caller's default). Its JSON is AIO's
// CodeExecuteRequest (plus sandbox, and language bash).
type ExecuteArgs struct {
	dispatch.On
	Language string   `json:"language" required:"true" enum:"python,javascript,bash"`
	Code     string   `json:"code" required:"true"`
	Timeout  *float64 `json:"timeout,omitempty" minimum:"1" maximum:"300" doc:"wall timeout in seconds (default 30)"`
	Cwd      string   `json:"cwd,omitempty"`
	Stateful bool     `json:"stateful,omitempty" doc:"run in a session that keeps state between calls"`
	// SessionID names the session of a stateful run; a new id starts a
	// session with that id (the caller's own, within the per-key cap).
	SessionID string `json:"session_id,omitempty" doc:"the session to run in (stateful): an existing one of the caller's, or a new one with this id; empty: a new session with a generated id"`
	// Output streams the cell's stdout and stderr as they come
	// (Request.Output); set by Go callers only (E2B's runCode).
	Output func(stream string, p []byte) `json:"-"`
	// Env are the cell's own environment variables (Request.Env).
	Env map[string]string `json:"env,omitempty" doc:"environment variables of this cell alone (python, javascript), restored after it; LD_PRELOAD and the like need an admin key"`
}

// ArgsOf is the ExecuteArgs of running r in sandbox sb.
func ArgsOf(sb string, r Request) ExecuteArgs {
	a := ExecuteArgs{On: dispatch.On{Sandbox: sb}, Language: r.Language, Code: r.Code, Cwd: r.Cwd, Stateful: r.Stateful, SessionID: r.SessionID, Env: r.Env}
	if r.Timeout != 0 {
		t := r.Timeout.Seconds()
		a.Timeout = &t
	}
	return a
}

// Request is the execution a's fields describe (defaults filled in by
// Validate's rules, see CheckRequest).
func (a ExecuteArgs) Request() Request {
	r := Request{Language: a.Language, Code: a.Code, Cwd: a.Cwd, Stateful: a.Stateful, SessionID: a.SessionID, Output: a.Output, Env: a.Env}
	if a.Timeout != nil {
		r.Timeout = seconds(*a.Timeout)
	}
	return r
}

// Validate implements dispatch.Validator: the rules of every field (the
// timeout is 1..300 seconds, AIO's range).
func (a ExecuteArgs) Validate() error {
	if a.Timeout != nil && !(*a.Timeout >= 1 && *a.Timeout <= MaxTimeout.Seconds()) {
		return fault.InvalidField("timeout", fmt.Sprintf("timeout must be between 1 and %d seconds", int(MaxTimeout.Seconds())))
	}
	r := a.Request()
	return CheckRequest(&r)
}

// SandboxArgs names a sandbox ("" = the caller's default) and, for the
// session tools, a language and a session.
type SandboxArgs struct {
	dispatch.On
	Language  string `json:"language,omitempty" enum:",python,javascript,bash"`
	SessionID string `json:"session_id,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	// All deletes every session of Language (code.session.delete).
	All bool `json:"all,omitempty"`
}

// Assess rates code with the command guard, the way exec.run rates the
// same program run by hand: bash is a command line; python and javascript
// are the inline programs of `python3 -c CODE` and `node -e CODE`, which
// the guard rates Medium and raises to Dangerous when its skim finds a
// destructive or exfiltrating command handed to system(), subprocess,
// child_process and friends. Rating code.execute above exec.run of the
// same program would add no safety (the agent would run python3 -c
// through exec.run) and would put every cell of an agent behind an
// operator's approval; rating it lower would launder risk.
func Assess(g *guard.Guard, r Request) dispatch.Assessment {
	line := r.Code
	switch r.Language {
	case Python:
		line = "python3 -c " + shellQuote(r.Code)
	case JavaScript:
		line = "node -e " + shellQuote(r.Code)
	}
	// Everything the guard saw, as for exec.run: the command names (the
	// policy's commands lists see `curl` in execSync('curl …')) and the
	// words that may name files, in the cell's directory (paths lists).
	a := dispatch.FromVerdict(g.Classify(line))
	a.Paths = guard.InDir(a.Paths, r.Cwd)
	return a
}

// auditCodeBytes caps the code kept in an audit record; the record keeps
// the whole code's size and SHA-256, so a longer cell is still identified.
const auditCodeBytes = 4096

func auditCode(code string) string {
	if len(code) <= auditCodeBytes {
		return code
	}
	cut := auditCodeBytes
	for cut > 0 && !utf8.RuneStart(code[cut]) {
		cut--
	}
	return code[:cut] + "…"
}

var viewers = []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}

// Tools declares the code capabilities; the guard rates the code.
// Arguments are read the AIO way (unknown fields ignored).
func Tools(s *Service, g *guard.Guard) []dispatch.Tool {
	return []dispatch.Tool{executeTool(s, g), infoTool(s), sessionsTool(s), sessionCreateTool(s), sessionDeleteTool(s)}
}

func spec(desc string, risk guard.Risk, cat ratelimit.Category, roles []auth.Role) dispatch.Spec {
	return dispatch.Spec{Description: desc, Risk: risk, Category: cat, Roles: roles, Lenient: true}
}

// runsCode is the Spec of a tool that runs the caller's code: in a resident
// interpreter as well as in a process of its own, so its record is durable
// before the run starts (dispatch, "Record first").
func runsCode(s dispatch.Spec) dispatch.Spec {
	s.Commands = dispatch.RecordFirst
	return s
}

func executeTool(s *Service, g *guard.Guard) dispatch.Tool {
	// The declared tier is the floor; Assess raises it per call.
	return dispatch.Define(ToolExecute, runsCode(spec("Run python, javascript or bash code in a sandbox, statelessly or in a session that keeps state (risk: the command guard's verdict on the code as bash, python3 -c or node -e)",
		guard.Safe, ratelimit.Exec, nil)),
		func(ctx context.Context, c auth.Caller, a ExecuteArgs) (Result, error) {
			return s.Execute(ctx, c, a.Sandbox, a.Request())
		}, dispatch.Hooks[ExecuteArgs, Result]{
			Assess:   func(a ExecuteArgs) dispatch.Assessment { return Assess(g, a.Request()) },
			Describe: describeExecute,
			Summarize: func(_ ExecuteArgs, r Result) map[string]any {
				out := map[string]any{"status": r.Status, "duration_ms": r.DurationMS, "cpu_ms": r.CPUMS}
				if r.SessionID != "" {
					out["session_id"] = r.SessionID
				}
				if r.StateLost {
					out["state_lost"] = true
				}
				if r.Reason != "" {
					out["reason"] = r.Reason
				}
				return out
			},
		})
}

func infoTool(s *Service) dispatch.Tool {
	return dispatch.Define(ToolInfo, spec("Supported code runtimes and their versions", guard.Safe, 0, viewers),
		func(ctx context.Context, c auth.Caller, a SandboxArgs) ([]LanguageInfo, error) {
			return s.Info(ctx, c, a.Sandbox)
		}, dispatch.Hooks[SandboxArgs, []LanguageInfo]{})
}

func sessionsTool(s *Service) dispatch.Tool {
	return dispatch.Define(ToolSessions, spec("List the caller's code sessions in a sandbox", guard.Safe, 0, viewers),
		func(ctx context.Context, c auth.Caller, a SandboxArgs) ([]SessionInfo, error) {
			return s.Sessions(ctx, c, a.Sandbox, a.Language)
		}, dispatch.Hooks[SandboxArgs, []SessionInfo]{})
}

// describeExecute is what the audit record keeps of a cell: its code (up
// to auditCodeBytes), size and SHA-256.
func describeExecute(a ExecuteArgs) dispatch.Target {
	sum := sha256.Sum256([]byte(a.Code))
	return dispatch.Target{Target: auditCode(a.Code), Sandbox: a.Sandbox, Detail: map[string]any{
		"language": a.Language, "stateful": a.Stateful, "session_id": a.SessionID,
		"code_bytes": len(a.Code), "code_sha256": hex.EncodeToString(sum[:])}}
}

func describeSession(a SandboxArgs) dispatch.Target {
	return dispatch.Target{Target: a.SessionID, Sandbox: a.Sandbox, Detail: map[string]any{"language": a.Language, "all": a.All}}
}

// sessionCreateTool: creating a session runs no code of the caller's, but
// it starts a resident interpreter: medium, and counted as an execution.
func sessionCreateTool(s *Service) dispatch.Tool {
	return dispatch.Define(ToolSessionCreate, spec("Start a code session (a resident interpreter)", guard.Medium, ratelimit.Exec, nil),
		func(ctx context.Context, c auth.Caller, a SandboxArgs) (SessionInfo, error) {
			return s.CreateSession(ctx, c, a.Sandbox, a.Language, a.SessionID, a.Cwd)
		}, dispatch.Hooks[SandboxArgs, SessionInfo]{Describe: describeSession})
}

// sessionDeleteTool: ending one's own session only stops work: safe, and
// possible while the server is halted. It answers how many it ended.
func sessionDeleteTool(s *Service) dispatch.Tool {
	return dispatch.Define(ToolSessionDelete, spec("End a code session (or all of a language's, with all)", guard.Safe, 0, nil),
		func(ctx context.Context, c auth.Caller, a SandboxArgs) (int, error) {
			if a.All {
				return s.DeleteSessions(ctx, c, a.Sandbox, a.Language)
			}
			if a.SessionID == "" {
				return 0, fault.InvalidField("session_id", "session_id is required")
			}
			return 1, s.DeleteSession(ctx, c, a.Sandbox, a.SessionID)
		}, dispatch.Hooks[SandboxArgs, int]{Describe: describeSession})
}
