package coderun

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/sessions"
)

// Tool names of AIO's nodejs namespace: the javascript runtime of
// code.execute (a resident /usr/bin/node per session, one vm context),
// with AIO's request and answer shapes.
var (
	ToolNodeExecute       = dispatch.Ref[NodeExecuteArgs, NodeExecuteResult]("nodejs.execute")
	ToolNodeInfo          = dispatch.Ref[NodeInfoArgs, NodeInfo]("nodejs.info")
	ToolNodeSessionCreate = dispatch.Ref[NodeSessionArgs, NodeCreateResult]("nodejs.session_create")
	ToolNodeSessions      = dispatch.Ref[NodeInfoArgs, NodeSessionsResult]("nodejs.sessions")
	ToolNodeSession       = dispatch.Ref[NodeSessionArgs, NodeSessionResult]("nodejs.session_get")
	ToolNodeSessionUpdate = dispatch.Ref[NodeSessionArgs, NodeUpdateResult]("nodejs.session_update")
	ToolNodeSessionDelete = dispatch.Ref[NodeSessionArgs, NodeDeleteResult]("nodejs.session_delete")
)

// AIO's max_idle_time bounds (seconds). The server's session idle timeout
// caps what a session gets (Session.MaxIdleTime says what it has).
const (
	minNodeIdle = 60
	maxNodeIdle = 86400
)

// nodeVersion is what AIO's version field may say: node20, 20 …
var nodeVersion = regexp.MustCompile(`^(node)?[0-9]{1,3}$`)

// NodeExecuteArgs is AIO's NodeJSExecuteRequest (plus sandbox).
type NodeExecuteArgs struct {
	dispatch.On
	Code      string            `json:"code" required:"true" doc:"JavaScript code to execute"`
	Timeout   *float64          `json:"timeout,omitempty" minimum:"1" maximum:"300" doc:"execution timeout in seconds (default 30)"`
	Stdin     *string           `json:"stdin,omitempty" doc:"not supported: must be empty"`
	Files     map[string]string `json:"files,omitempty" doc:"not supported: write files with /v1/file/write first"`
	Stateful  bool              `json:"stateful,omitempty" doc:"run in a session that keeps state (one vm context)"`
	SessionID string            `json:"session_id,omitempty" doc:"the caller's session to run in; a new id starts a session with it"`
	Cwd       string            `json:"cwd,omitempty" doc:"working directory (absolute, inside the sandbox)"`
	Version   string            `json:"version,omitempty" doc:"node major version (node20 or 20): must be the installed one"`
}

func (a NodeExecuteArgs) execute() ExecuteArgs {
	return ExecuteArgs{On: dispatch.On{Sandbox: a.Sandbox}, Language: JavaScript, Code: a.Code, Timeout: a.Timeout, Cwd: a.Cwd,
		Stateful: a.Stateful, SessionID: a.SessionID}
}

// Validate implements dispatch.Validator.
func (a NodeExecuteArgs) Validate() error {
	switch {
	case a.Stdin != nil && *a.Stdin != "":
		return fault.InvalidField("stdin", "stdin is not supported: the code runs in a session's vm context without a stdin stream")
	case len(a.Files) > 0:
		return fault.InvalidField("files", "files is not supported: write them with /v1/file/write first")
	case a.Version != "" && !nodeVersion.MatchString(a.Version):
		return fault.InvalidField("version", "version is node20, 20 or the like")
	}
	return a.execute().Validate()
}

// NodeExecuteResult is AIO's NodeJSExecuteResponse.
type NodeExecuteResult struct {
	Language       string   `json:"language"`
	Status         string   `json:"status"`
	ExecutionCount *int     `json:"execution_count"`
	Outputs        []Output `json:"outputs"`
	Code           string   `json:"code"`
	Stdout         string   `json:"stdout"`
	Stderr         string   `json:"stderr"`
	ExitCode       int      `json:"exit_code"`
	SessionID      *string  `json:"session_id"`
}

// NodeInfoArgs names a sandbox.
type NodeInfoArgs struct {
	dispatch.On
}

// NodeInfo is AIO's NodeJSRuntimeInfo.
type NodeInfo struct {
	NodeVersion        string   `json:"node_version"`
	NpmVersion         string   `json:"npm_version"`
	SupportedLanguages []string `json:"supported_languages"`
	Description        string   `json:"description"`
	RuntimeDirectory   *string  `json:"runtime_directory"`
	GlobalNpmDirectory *string  `json:"global_npm_directory"`
	RuntimePackages    []string `json:"runtime_packages"`
	GlobalPackages     []string `json:"global_packages"`
	Error              *string  `json:"error"`
	AvailableVersions  []string `json:"available_versions"`
	CurrentVersion     *string  `json:"current_version"`
}

// NodeSessionArgs is AIO's NodeJSCreateSessionRequest and
// NodeJSUpdateSessionRequest (plus sandbox; session_id from the path for
// get, update and delete).
type NodeSessionArgs struct {
	dispatch.On
	SessionID   string `json:"session_id,omitempty" doc:"the session's id (create: auto-generated if empty)"`
	Cwd         string `json:"cwd,omitempty" doc:"working directory of the session's cells"`
	MaxIdleTime *int   `json:"max_idle_time,omitempty" minimum:"60" maximum:"86400" doc:"seconds without use before the session ends (capped by the server's session idle timeout)"`
}

// Validate implements dispatch.Validator.
func (a NodeSessionArgs) Validate() error {
	if a.SessionID != "" {
		if err := CheckSessionID(a.SessionID); err != nil {
			return err
		}
	}
	if a.Cwd != "" {
		if err := (ExecuteArgs{Language: JavaScript, Cwd: a.Cwd}).Validate(); err != nil {
			return err
		}
	}
	if a.MaxIdleTime != nil && (*a.MaxIdleTime < minNodeIdle || *a.MaxIdleTime > maxNodeIdle) {
		return fault.InvalidField("max_idle_time", fmt.Sprintf("max_idle_time must be between %d and %d seconds", minNodeIdle, maxNodeIdle))
	}
	return nil
}

// NodeSession is AIO's NodeJSSessionInfo.
type NodeSession struct {
	SessionID   string  `json:"session_id"`
	Cwd         string  `json:"cwd"`
	CreatedAt   float64 `json:"created_at" doc:"ms since the epoch"`
	LastUsed    float64 `json:"last_used" doc:"ms since the epoch"`
	MaxIdleTime int64   `json:"max_idle_time" doc:"milliseconds"`
	AgeSeconds  int     `json:"age_seconds" doc:"seconds since the last use"`
	State       string  `json:"state" enum:"IDLE,EXECUTING"`
}

// NodeCreateResult is AIO's NodeJSCreateSessionResponse.
type NodeCreateResult struct {
	SessionID string       `json:"session_id"`
	Created   bool         `json:"created"`
	Message   *string      `json:"message"`
	Session   *NodeSession `json:"session"`
}

// NodeSessionsResult is AIO's NodeJSSessionListResponse.
type NodeSessionsResult struct {
	Sessions map[string]NodeSession `json:"sessions"`
}

// NodeSessionResult is AIO's NodeJSSessionResponse.
type NodeSessionResult struct {
	Session NodeSession `json:"session"`
}

// NodeUpdateResult is AIO's NodeJSUpdateSessionResponse.
type NodeUpdateResult struct {
	Updated bool        `json:"updated"`
	Session NodeSession `json:"session"`
}

// NodeDeleteResult is AIO's NodeJSDeleteSessionResponse.
type NodeDeleteResult struct {
	Deleted bool `json:"deleted"`
}

// NodeTools declares AIO's nodejs operations on the code machinery.
func NodeTools(s *Service, g *guard.Guard) []dispatch.Tool {
	sandboxOf := func(a NodeSessionArgs) dispatch.Target {
		return dispatch.Target{Target: a.SessionID, Sandbox: a.Sandbox, Detail: map[string]any{"language": JavaScript}}
	}
	return []dispatch.Tool{
		dispatch.Define(ToolNodeExecute, runsCode(spec("Run JavaScript with Node.js, statelessly or in a session that keeps state (risk: the command guard's verdict on node -e CODE)", guard.Safe, ratelimit.Exec, nil)),
			func(ctx context.Context, c auth.Caller, a NodeExecuteArgs) (NodeExecuteResult, error) {
				if a.Version != "" {
					if err := s.checkNodeVersion(ctx, c, a.Sandbox, a.Version); err != nil {
						return NodeExecuteResult{}, err
					}
				}
				r, err := s.Execute(ctx, c, a.Sandbox, a.execute().Request())
				if err != nil {
					return NodeExecuteResult{}, err
				}
				out := NodeExecuteResult{Language: JavaScript, Status: r.Status, Outputs: r.Outputs, Code: a.Code, Stdout: r.Stdout, Stderr: r.Stderr}
				if r.ExitCode != nil {
					out.ExitCode = *r.ExitCode
				}
				n := r.ExecutionCount
				out.ExecutionCount = &n
				if r.SessionID != "" {
					id := r.SessionID
					out.SessionID = &id
				}
				return out, nil
			}, dispatch.Hooks[NodeExecuteArgs, NodeExecuteResult]{
				Assess:   func(a NodeExecuteArgs) dispatch.Assessment { return Assess(g, a.execute().Request()) },
				Describe: func(a NodeExecuteArgs) dispatch.Target { return describeExecute(a.execute()) },
			}),
		dispatch.Define(ToolNodeInfo, spec("Node.js runtime information", guard.Safe, 0, viewers),
			func(ctx context.Context, c auth.Caller, a NodeInfoArgs) (NodeInfo, error) {
				return s.nodeInfo(ctx, c, a.Sandbox)
			},
			dispatch.Hooks[NodeInfoArgs, NodeInfo]{}),
		// Starting a session starts a resident interpreter: medium, and
		// counted as an execution (as code.session.create).
		dispatch.Define(ToolNodeSessionCreate, spec("Start a Node.js session (a resident interpreter)", guard.Medium, ratelimit.Exec, nil),
			func(ctx context.Context, c auth.Caller, a NodeSessionArgs) (NodeCreateResult, error) {
				in, err := s.CreateSession(ctx, c, a.Sandbox, JavaScript, a.SessionID, a.Cwd)
				if err != nil {
					return NodeCreateResult{}, err
				}
				ns, err := s.nodeSession(ctx, c, a.Sandbox, in.ID, a.MaxIdleTime, "")
				if err != nil {
					return NodeCreateResult{}, err
				}
				msg := "session created"
				return NodeCreateResult{SessionID: in.ID, Created: true, Message: &msg, Session: &ns}, nil
			}, dispatch.Hooks[NodeSessionArgs, NodeCreateResult]{Describe: sandboxOf}),
		dispatch.Define(ToolNodeSessions, spec("List the caller's Node.js sessions", guard.Safe, 0, viewers),
			func(ctx context.Context, c auth.Caller, a NodeInfoArgs) (NodeSessionsResult, error) {
				list, err := s.Sessions(ctx, c, a.Sandbox, JavaScript)
				if err != nil {
					return NodeSessionsResult{}, err
				}
				out := NodeSessionsResult{Sessions: map[string]NodeSession{}}
				for _, in := range list {
					if ns, err := s.nodeSession(ctx, c, a.Sandbox, in.ID, nil, ""); err == nil {
						out.Sessions[in.ID] = ns
					}
				}
				return out, nil
			}, dispatch.Hooks[NodeInfoArgs, NodeSessionsResult]{}),
		dispatch.Define(ToolNodeSession, spec("Describe one of the caller's Node.js sessions", guard.Safe, 0, viewers),
			func(ctx context.Context, c auth.Caller, a NodeSessionArgs) (NodeSessionResult, error) {
				ns, err := s.nodeSession(ctx, c, a.Sandbox, a.SessionID, nil, "")
				return NodeSessionResult{Session: ns}, err
			}, dispatch.Hooks[NodeSessionArgs, NodeSessionResult]{Describe: sandboxOf}),
		dispatch.Define(ToolNodeSessionUpdate, spec("Change a Node.js session's working directory or idle time", guard.Safe, 0, nil),
			func(ctx context.Context, c auth.Caller, a NodeSessionArgs) (NodeUpdateResult, error) {
				ns, err := s.nodeSession(ctx, c, a.Sandbox, a.SessionID, a.MaxIdleTime, a.Cwd)
				return NodeUpdateResult{Updated: err == nil, Session: ns}, err
			}, dispatch.Hooks[NodeSessionArgs, NodeUpdateResult]{Describe: sandboxOf}),
		// Ending one's own session only stops work: safe.
		dispatch.Define(ToolNodeSessionDelete, spec("End one of the caller's Node.js sessions", guard.Safe, 0, nil),
			func(ctx context.Context, c auth.Caller, a NodeSessionArgs) (NodeDeleteResult, error) {
				if _, err := s.nodeSession(ctx, c, a.Sandbox, a.SessionID, nil, ""); err != nil {
					return NodeDeleteResult{}, err
				}
				return NodeDeleteResult{Deleted: true}, s.DeleteSession(ctx, c, a.Sandbox, a.SessionID)
			}, dispatch.Hooks[NodeSessionArgs, NodeDeleteResult]{Describe: sandboxOf}),
	}
}

// nodeSession describes the caller's javascript session id, first
// setting its idle timeout (idle seconds, if not nil) and cwd (if set).
// A session of another language is not found.
func (s *Service) nodeSession(ctx context.Context, c auth.Caller, sandboxID, id string, idle *int, cwd string) (NodeSession, error) {
	if id == "" {
		return NodeSession{}, fault.InvalidField("session_id", "session_id is required")
	}
	sb, err := s.m.Resolve(ctx, c, sandboxID)
	if err != nil {
		return NodeSession{}, err
	}
	ss, err := s.lookup(c, sb.ID(), id)
	if err != nil || ss.lang != JavaScript {
		return NodeSession{}, fault.New(fault.NotFound, "no such session")
	}
	k := sessions.Key{Kind: kindCode, Sandbox: sb.ID(), Owner: c.KeyID, ID: id}
	if idle != nil {
		s.sessions.SetIdle(k, time.Duration(*idle)*time.Second)
	}
	ss.mu.Lock()
	if cwd != "" {
		ss.cwd = cwd
	}
	ns := NodeSession{SessionID: ss.id, Cwd: ss.cwd, CreatedAt: float64(ss.created.UnixMilli()), LastUsed: float64(ss.lastUsed.UnixMilli()),
		AgeSeconds: int(time.Since(ss.lastUsed).Seconds()), State: "IDLE"}
	if ss.busy {
		ns.State = "EXECUTING"
	}
	ss.mu.Unlock()
	if ns.Cwd == "" {
		ns.Cwd = "/workspace"
	}
	ns.MaxIdleTime = s.sessions.IdleOf(k).Milliseconds()
	return ns, nil
}

// nodeInfo reports the sandbox's node (its version learnt as code.info
// learns it) and npm.
func (s *Service) nodeInfo(ctx context.Context, c auth.Caller, sandboxID string) (NodeInfo, error) {
	langs, err := s.Info(ctx, c, sandboxID)
	if err != nil {
		return NodeInfo{}, err
	}
	out := NodeInfo{SupportedLanguages: []string{JavaScript}, Description: runtimes[JavaScript].desc,
		RuntimePackages: []string{}, GlobalPackages: []string{}, AvailableVersions: []string{}}
	for _, l := range langs {
		if l.Language == JavaScript && l.RuntimeVersion != nil {
			out.NodeVersion = *l.RuntimeVersion
		}
	}
	if out.NodeVersion == "" {
		e := "node is not available in this sandbox (/usr/bin/node)"
		out.Error = &e
		return out, nil
	}
	cur := "node" + nodeMajor(out.NodeVersion)
	out.CurrentVersion, out.AvailableVersions = &cur, []string{cur}
	dir := "/usr/bin"
	out.RuntimeDirectory = &dir
	out.NpmVersion = s.npmVersion(ctx, c, sandboxID)
	return out, nil
}

// nodeMajor is "20" of "v20.20.2".
func nodeMajor(v string) string {
	v = strings.TrimPrefix(v, "v")
	major, _, _ := strings.Cut(v, ".")
	return major
}

// checkNodeVersion refuses a version other than the installed one.
func (s *Service) checkNodeVersion(ctx context.Context, c auth.Caller, sandboxID, want string) error {
	info, err := s.nodeInfo(ctx, c, sandboxID)
	if err != nil {
		return err
	}
	if info.NodeVersion == "" || strings.TrimPrefix(want, "node") != nodeMajor(info.NodeVersion) {
		return fault.InvalidField("version", fmt.Sprintf("only %s is installed", strings.Join(append(info.AvailableVersions, ""), " ")))
	}
	return nil
}

// npmVersion asks the sandbox's npm once per server (npm starts a node:
// too slow for every info call); "" when npm is missing.
func (s *Service) npmVersion(ctx context.Context, c auth.Caller, sandboxID string) string {
	s.mu.Lock()
	p, ok := s.probes["npm"]
	s.mu.Unlock()
	if ok {
		return p.version
	}
	sb, err := s.m.Resolve(ctx, c, sandboxID)
	if err != nil {
		return ""
	}
	e, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "npm --version", Timeout: 30 * time.Second, Actor: "system"})
	if err != nil {
		return ""
	}
	<-e.Done()
	r := e.Result()
	v := ""
	if r.ExitCode != nil && *r.ExitCode == 0 {
		v = strings.TrimSpace(r.Stdout)
	}
	s.mu.Lock()
	s.probes["npm"] = probe{version: v, ok: v != ""}
	s.mu.Unlock()
	return v
}
