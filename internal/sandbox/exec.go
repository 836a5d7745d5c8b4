package sandbox

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox/execrun"
)

// A sandbox's executions, its long-lived processes and the execution
// groups they run in are its execution table's (internal/sandbox/execrun,
// Sandbox.execs); the sandbox is its Host (execHost) and tells it when an
// init starts and stops (startLocked, watch, shutdown).

// Execution limits and defaults (SECURITY-RULES.md → Exec).
const (
	DefaultTimeout     = execrun.DefaultTimeout
	MaxTimeout         = execrun.MaxTimeout
	DefaultOutputLimit = execrun.DefaultOutputLimit
	MaxOutputLimit     = execrun.MaxOutputLimit
	MaxStdin           = execrun.MaxStdin
)

// Statuses of an execution.
const (
	StatusRunning   = execrun.StatusRunning
	StatusCompleted = execrun.StatusCompleted
	StatusTimedOut  = execrun.StatusTimedOut
	StatusKilled    = execrun.StatusKilled
)

// Reasons an execution was killed.
const (
	ReasonMemory  = execrun.ReasonMemory
	ReasonCPU     = execrun.ReasonCPU
	ReasonTimeout = execrun.ReasonTimeout
	ReasonClient  = execrun.ReasonClient
)

type (
	// ExecRequest is one command to run.
	ExecRequest = execrun.ExecRequest
	// Execution is a command started in a sandbox.
	Execution = execrun.Execution
	// Result is a finished (or running) execution's outcome.
	Result = execrun.Result
	// SpawnSpec starts a long-lived process (Spawn).
	SpawnSpec = execrun.SpawnSpec
	// Proc is a process started with Spawn.
	Proc = execrun.Proc
)

// newExecs makes the execution table of s.
func newExecs(s *Sandbox) *execrun.Table {
	return execrun.New((*execHost)(s), execrun.Config{
		ID: s.rec.ID, MaxExecs: s.m.cfg.MaxExecsPerSandbox, V2: s.m.cg.Info().Version == 2,
		AllowSudo: s.m.cfg.AllowSudo, Log: s.m.log,
	})
}

// Exec starts a command (execrun.Table.Exec). Unless r.Background, it
// waits for the end and the caller's ctx bounds it: a cancelled ctx (a
// client that went away) kills the execution's tree. A background
// execution outlives ctx and is found again with Execution(id).
func (s *Sandbox) Exec(ctx context.Context, r ExecRequest) (*Execution, error) {
	return s.execs.Exec(ctx, r)
}

// Execution returns a running or recently finished execution.
func (s *Sandbox) Execution(id string) (*Execution, error) { return s.execs.Execution(id) }

// Spawn starts a process in its own execution group (execrun.Table.Spawn).
func (s *Sandbox) Spawn(ctx context.Context, sp SpawnSpec) (*Proc, error) {
	return s.execs.Spawn(ctx, sp)
}

// Extract unpacks src into the directory dest, by the init, inside the
// sandbox (execrun.Table.Extract); refusals are *archive.Error.
func (s *Sandbox) Extract(ctx context.Context, dest string, format archive.Format, lim archive.Limits, deny agent.Deny, src *os.File) (archive.Result, error) {
	return s.execs.Extract(ctx, dest, format, lim, deny, src)
}

// Pack streams the tree under dir as an archive written by the init
// (execrun.Table.Pack); a tree holding a name deny refuses is refused.
func (s *Sandbox) Pack(ctx context.Context, dir string, format archive.Format, lim archive.Limits, deny agent.Deny) (io.ReadCloser, error) {
	return s.execs.Pack(ctx, dir, format, lim, deny)
}

// NewOutput makes a stream of at most limit kept bytes charged to the
// sandbox owner's share of the server's output budget (Config.OutputBudget).
func (s *Sandbox) NewOutput(limit int) *outbuf.Output {
	return s.m.cfg.OutputBudget.NewOutput(s.rec.Owner, limit)
}

// File runs one file primitive inside the sandbox (see agent.Client.File);
// a stopped sandbox is started first.
func (s *Sandbox) File(ctx context.Context, op agent.Op, r agent.FileReq) (*agent.FileResp, *os.File, error) {
	inst, err := s.ensure(ctx)
	if err != nil {
		return nil, nil, err
	}
	s.touch()
	return inst.File(ctx, op, r)
}

// Touch marks the sandbox used now, for callers that keep it busy without
// a new execution (a stateful interpreter answering a cell).
func (s *Sandbox) Touch() { s.touch() }

func (s *Sandbox) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// execHost is the sandbox as its execution table sees it (execrun.Host).
type execHost Sandbox

func (h *execHost) s() *Sandbox { return (*Sandbox)(h) }

func (h *execHost) Ensure(ctx context.Context) (*agent.Instance, error) { return h.s().ensure(ctx) }

func (h *execHost) Limits() execrun.Limits {
	l := h.rec.Spec.Limits
	return execrun.Limits{CPUTime: l.CPUTime, DiskBytes: l.DiskBytes, Pids: l.Pids, TTL: h.rec.Spec.TTL}
}

func (h *execHost) Shell() string                                   { return h.s().shell() }
func (h *execHost) DefaultCwd() string                              { return h.s().defaultCwd() }
func (h *execHost) BaseEnv() map[string]string                      { return h.s().baseEnv() }
func (h *execHost) NetEnv(user map[string]string) map[string]string { return h.s().netEnv(user) }
func (h *execHost) NewOutput(limit int) *outbuf.Output              { return h.s().NewOutput(limit) }
func (h *execHost) Touch()                                          { h.s().touch() }
func (h *execHost) FirstCommandEnded()                              { h.s().firstCommandEnded() }
func (h *execHost) Observe(status string)                           { h.m.observeExec(status) }

func (h *execHost) Capped(limit int, msg string) error {
	return dispatch.CapRefusal(ratelimit.Executions, limit, execCapRetry, msg)
}

func (h *execHost) Audit(ctx context.Context, actor, action, verdict string, detail map[string]any) {
	h.m.audit(ctx, Event{Actor: actor, Action: action, Sandbox: h.rec.ID, Verdict: verdict, Detail: detail})
}
