package coderun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Tool names of the code capabilities.
const (
	ToolExecute       = "code.execute"
	ToolInfo          = "code.info"
	ToolSessions      = "code.sessions"
	ToolSessionCreate = "code.session.create"
	ToolSessionDelete = "code.session.delete"
)

// ExecuteArgs runs code in sandbox Sandbox ("" = the caller's default).
type ExecuteArgs struct {
	Sandbox string
	Req     Request
}

// SandboxArgs names a sandbox ("" = the caller's default) and, for the
// session tools, a language and a session.
type SandboxArgs struct {
	Sandbox   string `json:"sandbox,omitempty"`
	Language  string `json:"language,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	// All deletes every session of Language (code.session.delete).
	All bool `json:"all,omitempty"`
}

// executeJSON is code.execute's JSON argument shape (MCP, /v1/tools/call).
type executeJSON struct {
	Sandbox   string   `json:"sandbox"`
	Language  string   `json:"language"`
	Code      string   `json:"code"`
	Timeout   *float64 `json:"timeout"`
	Cwd       string   `json:"cwd"`
	Stateful  bool     `json:"stateful"`
	SessionID string   `json:"session_id"`
}

const executeSchema = `{"type":"object","required":["language","code"],"properties":{` +
	`"sandbox":{"type":"string","description":"sandbox id; empty: the caller's default sandbox"},` +
	`"language":{"type":"string","enum":["python","javascript","bash"]},` +
	`"code":{"type":"string"},` +
	`"timeout":{"type":"integer","minimum":1,"maximum":300,"description":"wall timeout in seconds (default 30)"},` +
	`"cwd":{"type":"string"},` +
	`"stateful":{"type":"boolean","description":"run in a session that keeps state between calls"},` +
	`"session_id":{"type":"string","description":"the session to run in; empty with stateful: a new session"}}}`

func decodeStrict[T any](raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fault.InvalidField("arguments", "arguments do not match the tool's schema: "+err.Error())
	}
	return v, nil
}

func decodeExecute(raw json.RawMessage) (any, error) {
	j, err := decodeStrict[executeJSON](raw)
	if err != nil {
		return nil, err
	}
	r := Request{Language: j.Language, Code: j.Code, Cwd: j.Cwd, Stateful: j.Stateful, SessionID: j.SessionID}
	if j.Timeout != nil {
		if *j.Timeout < 1 || *j.Timeout > MaxTimeout.Seconds() {
			return nil, fault.InvalidField("timeout", "timeout must be between 1 and 300 seconds")
		}
		r.Timeout = seconds(*j.Timeout)
	}
	if err := CheckRequest(&r); err != nil {
		return nil, err
	}
	return ExecuteArgs{Sandbox: j.Sandbox, Req: r}, nil
}

func decodeSandboxArgs(raw json.RawMessage) (any, error) { return decodeStrict[SandboxArgs](raw) }

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
	v := g.Classify(line)
	return dispatch.Assessment{Risk: v.Risk, Rules: v.Rules, Reasons: v.Reasons, Dynamic: v.Dynamic, Guard: dispatch.FromVerdict(v).Guard}
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

// RegisterTools adds the code capabilities to d.
func RegisterTools(d *dispatch.Dispatcher, s *Service, g *guard.Guard) {
	d.MustRegister(dispatch.Tool{
		Name:        ToolExecute,
		Description: "Run python, javascript or bash code in a sandbox, statelessly or in a session that keeps state (risk: the command guard's verdict on the code as bash, python3 -c or node -e)",
		// The declared tier is the floor; Assess raises it per call.
		Risk: guard.Safe, Category: ratelimit.Exec,
		InputSchema: json.RawMessage(executeSchema),
		Decode:      decodeExecute,
		Assess:      func(args any) dispatch.Assessment { return Assess(g, args.(ExecuteArgs).Req) },
		Describe: func(args any) dispatch.Target {
			a := args.(ExecuteArgs)
			sum := sha256.Sum256([]byte(a.Req.Code))
			return dispatch.Target{Target: auditCode(a.Req.Code), Sandbox: a.Sandbox, Detail: map[string]any{
				"language": a.Req.Language, "stateful": a.Req.Stateful, "session_id": a.Req.SessionID,
				"code_bytes": len(a.Req.Code), "code_sha256": hex.EncodeToString(sum[:])}}
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(ExecuteArgs)
			return s.Execute(ctx, c, a.Sandbox, a.Req)
		},
		Summarize: func(_, res any) map[string]any {
			r, ok := res.(Result)
			if !ok {
				return nil
			}
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
	d.MustRegister(dispatch.Tool{
		Name: ToolInfo, Description: "Supported code runtimes and their versions", Risk: guard.Safe, Roles: viewers,
		Decode: decodeSandboxArgs,
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			return s.Info(ctx, c, args.(SandboxArgs).Sandbox)
		},
	})
	d.MustRegister(dispatch.Tool{
		Name: ToolSessions, Description: "List the caller's code sessions in a sandbox", Risk: guard.Safe, Roles: viewers,
		Decode: decodeSandboxArgs,
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(SandboxArgs)
			return s.Sessions(ctx, c, a.Sandbox, a.Language)
		},
	})
	// Creating a session runs no code of the caller's, but it starts a
	// resident interpreter: medium, and counted as an execution.
	d.MustRegister(dispatch.Tool{
		Name: ToolSessionCreate, Description: "Start a code session (a resident interpreter)", Risk: guard.Medium, Category: ratelimit.Exec,
		Decode: decodeSandboxArgs,
		Describe: func(args any) dispatch.Target {
			a := args.(SandboxArgs)
			return dispatch.Target{Target: a.SessionID, Sandbox: a.Sandbox, Detail: map[string]any{"language": a.Language}}
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(SandboxArgs)
			return s.CreateSession(ctx, c, a.Sandbox, a.Language, a.SessionID, a.Cwd)
		},
	})
	// Ending one's own session only stops work: safe, and possible while
	// the server is halted.
	d.MustRegister(dispatch.Tool{
		Name: ToolSessionDelete, Description: "End a code session (or all of a language's, with all)", Risk: guard.Safe,
		Decode: decodeSandboxArgs,
		Describe: func(args any) dispatch.Target {
			a := args.(SandboxArgs)
			return dispatch.Target{Target: a.SessionID, Sandbox: a.Sandbox, Detail: map[string]any{"all": a.All}}
		},
		Run: func(ctx context.Context, c auth.Caller, args any) (any, error) {
			a := args.(SandboxArgs)
			if a.All {
				return s.DeleteSessions(ctx, c, a.Sandbox, a.Language)
			}
			if a.SessionID == "" {
				return nil, fault.InvalidField("session_id", "session_id is required")
			}
			return 1, s.DeleteSession(ctx, c, a.Sandbox, a.SessionID)
		},
	})
}
