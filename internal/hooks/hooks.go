// Package hooks runs commands on a sandbox's lifecycle events — AIO's
// /v1/sandbox/hooks. The one event is AIO's "shutdown": the hooks of a
// sandbox run, inside it, just before its processes are ended — when it
// is deleted (by a client or its TTL), stopped for being idle, or when the
// server shuts down. An agent uses them to flush state to /workspace, stop
// a dev server cleanly, or upload results before the sandbox goes.
//
// A hook runs like an exec of the key that registered it: inside the
// sandbox, as the sandbox user, with the sandbox's limits, a wall timeout
// (at most 60 s each; at most 120 s for one shutdown), its output capped.
// Lower priorities run first; hooks of one priority run in parallel. Each
// run is audited (action sandbox.hook, actor the registering key, the
// command's exit). Registering is rated by the command guard like exec.run
// (at least Medium: the command runs later, unattended), so the policy
// and approvals see the command when it is registered.
//
// Hooks live in server memory: they are lost when the server restarts
// (the sandbox's processes end then too, after the hooks ran). A revoked
// key's hooks are dropped. A paused (or HALT-frozen) sandbox's hooks do
// not run: its processes cannot be woken to run them.
package hooks

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// EventShutdown is the one lifecycle event (AIO's).
const EventShutdown = "shutdown"

// Defaults and caps, with their reasons.
const (
	// DefaultTimeout and DefaultPriority are AIO's defaults.
	DefaultTimeout  = 10.0
	DefaultPriority = 100
	// MaxTimeout caps one hook: a sandbox delete waits for its hooks.
	MaxTimeout = 60.0
	// ShutdownBudget caps all the hooks of one shutdown together.
	ShutdownBudget = 120 * time.Second
	// MaxPerSandbox caps the hooks of one sandbox (server memory, and
	// the time a shutdown takes).
	MaxPerSandbox = 32
	// maxCommand is AIO's maxLength of command.
	maxCommand = 4096
	// outputLimit is what a hook's run keeps of each stream (the audit
	// record holds none of it; the log gets the tail of stderr).
	outputLimit = 4096
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Hook is AIO's SandboxHook.
type Hook struct {
	Name     string  `json:"name" doc:"unique name for this hook"`
	Event    string  `json:"event" doc:"lifecycle event: shutdown"`
	Command  string  `json:"command" doc:"shell command, run with /bin/bash -c inside the sandbox"`
	Timeout  float64 `json:"timeout" doc:"per-hook timeout in seconds"`
	Priority int     `json:"priority" doc:"execution priority (lower = earlier); same priority hooks run in parallel"`
	Source   string  `json:"source" doc:"registration source: api (sandhold has no env hooks)"`

	owner string // the key that registered it: the actor of its runs
}

// RegisterArgs is AIO's RegisterHookRequest.
type RegisterArgs struct {
	dispatch.On
	Name     string   `json:"name" required:"true" maxLength:"64" doc:"unique name for this hook (letters, digits, _ and -)"`
	Event    string   `json:"event,omitempty" enum:"shutdown" doc:"lifecycle event (default shutdown)"`
	Command  string   `json:"command" required:"true" maxLength:"4096" doc:"shell command to execute"`
	Timeout  *float64 `json:"timeout,omitempty" doc:"per-hook timeout in seconds (default 10, at most 60)"`
	Priority *int     `json:"priority,omitempty" doc:"lower runs earlier; same priority runs in parallel (default 100)"`
}

// Validate checks every field's rule.
func (a RegisterArgs) Validate() error {
	switch {
	case !nameRE.MatchString(a.Name):
		return fault.InvalidField("body.name", "name must be 1-64 letters, digits, '_' or '-'")
	case a.Event != "" && a.Event != EventShutdown:
		return fault.InvalidField("body.event", "the supported event is shutdown")
	case a.Command == "":
		return fault.InvalidField("body.command", "command is required")
	case len(a.Command) > maxCommand:
		return fault.InvalidField("body.command", fmt.Sprintf("command longer than %d bytes", maxCommand))
	case a.Timeout != nil && (*a.Timeout <= 0 || *a.Timeout > MaxTimeout):
		return fault.InvalidField("body.timeout", fmt.Sprintf("timeout must be above 0 and at most %g seconds", MaxTimeout))
	case a.Priority != nil && (*a.Priority < -1000000 || *a.Priority > 1000000):
		return fault.InvalidField("body.priority", "priority must be between -1000000 and 1000000")
	}
	for _, r := range a.Command {
		if r == 0 {
			return fault.InvalidField("body.command", "command holds a NUL byte")
		}
	}
	return nil
}

// ListArgs filters by event (AIO's default: shutdown).
type ListArgs struct {
	dispatch.On
	Event string `json:"event,omitempty" doc:"only hooks of this event (default shutdown)"`
}

// RemoveArgs names a hook.
type RemoveArgs struct {
	dispatch.On
	Name string `json:"name" required:"true" maxLength:"64" doc:"the hook's name"`
}

// Removed is what remove answers.
type Removed struct {
	Name    string `json:"name"`
	Removed bool   `json:"removed"`
}

// Resolver returns the sandbox a call names ("" = the caller's default).
type Resolver func(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error)

// Service holds the hooks of every sandbox and runs them.
type Service struct {
	resolve Resolver
	audit   audit.Appender

	// mu guards hooks.
	mu    sync.Mutex
	hooks map[string]map[string]Hook // sandbox id → name → hook
}

// New returns a service; runs are audited to au (nil: not audited).
func New(resolve Resolver, au audit.Appender) *Service {
	return &Service{resolve: resolve, audit: au, hooks: make(map[string]map[string]Hook)}
}

// Register adds (or replaces, by name) a hook of the sandbox.
func (s *Service) Register(ctx context.Context, c auth.Caller, a RegisterArgs) (Hook, error) {
	if err := a.Validate(); err != nil {
		return Hook{}, err
	}
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Hook{}, err
	}
	h := Hook{Name: a.Name, Event: EventShutdown, Command: a.Command, Timeout: DefaultTimeout,
		Priority: DefaultPriority, Source: "api", owner: c.KeyID}
	if a.Timeout != nil {
		h.Timeout = *a.Timeout
	}
	if a.Priority != nil {
		h.Priority = *a.Priority
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.hooks[sb.ID()]
	if m == nil {
		m = make(map[string]Hook)
		s.hooks[sb.ID()] = m
	}
	if _, ok := m[h.Name]; !ok && len(m) >= MaxPerSandbox {
		return Hook{}, fault.New(fault.Conflict, fmt.Sprintf("the sandbox has %d hooks, the most it may hold; remove one first", MaxPerSandbox))
	}
	m[h.Name] = h
	return h, nil
}

// List returns the sandbox's hooks of the event, in the order they run.
func (s *Service) List(ctx context.Context, c auth.Caller, a ListArgs) ([]Hook, error) {
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	ev := a.Event
	if ev == "" {
		ev = EventShutdown
	}
	out := []Hook{}
	for _, h := range s.of(sb.ID()) {
		if h.Event == ev {
			out = append(out, h)
		}
	}
	return out, nil
}

// Remove deletes a hook by name.
func (s *Service) Remove(ctx context.Context, c auth.Caller, a RemoveArgs) (Removed, error) {
	sb, err := s.resolve(ctx, c, a.Sandbox)
	if err != nil {
		return Removed{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.hooks[sb.ID()][a.Name]; !ok {
		return Removed{}, fault.New(fault.NotFound, "no hook named "+a.Name)
	}
	delete(s.hooks[sb.ID()], a.Name)
	return Removed{Name: a.Name, Removed: true}, nil
}

// of returns the sandbox's hooks sorted by priority, then name.
func (s *Service) of(id string) []Hook {
	s.mu.Lock()
	out := make([]Hook, 0, len(s.hooks[id]))
	for _, h := range s.hooks[id] {
		out = append(out, h)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority < out[j].Priority
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Revoke drops every hook a revoked key registered.
func (s *Service) Revoke(keyID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, m := range s.hooks {
		for n, h := range m {
			if h.owner == keyID {
				delete(m, n)
			}
		}
		if len(m) == 0 {
			delete(s.hooks, id)
		}
	}
}

// Run is the Manager.BeforeStop callback: it runs the sandbox's shutdown
// hooks when the sandbox is running, and forgets them when the sandbox
// is deleted.
func (s *Service) Run(ctx context.Context, sb *sandbox.Sandbox, reason string) {
	if sb.State() == sandbox.Running {
		s.runHooks(ctx, sb, reason)
	}
	if reason == "delete" {
		s.mu.Lock()
		delete(s.hooks, sb.ID())
		s.mu.Unlock()
	}
}

// RunAll runs the shutdown hooks of every running sandbox at once (the
// server is stopping); it returns when all are done or ctx ends.
func (s *Service) RunAll(ctx context.Context, all []*sandbox.Sandbox) {
	var wg sync.WaitGroup
	for _, sb := range all {
		if sb.State() != sandbox.Running || len(s.of(sb.ID())) == 0 {
			continue
		}
		wg.Go(func() { s.runHooks(ctx, sb, "server_stop") })
	}
	wg.Wait()
}

// runHooks runs the hooks priority by priority, each priority's in
// parallel, within ShutdownBudget.
func (s *Service) runHooks(ctx context.Context, sb *sandbox.Sandbox, reason string) {
	hs := s.of(sb.ID())
	if len(hs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ShutdownBudget)
	defer cancel()
	for i := 0; i < len(hs); {
		j := i
		for j < len(hs) && hs[j].Priority == hs[i].Priority {
			j++
		}
		var wg sync.WaitGroup
		for _, h := range hs[i:j] {
			wg.Go(func() { s.runOne(ctx, sb, h, reason) })
		}
		wg.Wait()
		i = j
	}
}

func (s *Service) runOne(ctx context.Context, sb *sandbox.Sandbox, h Hook, reason string) {
	detail := map[string]any{"event": h.Event, "reason": reason, "priority": h.Priority}
	verdict := "error"
	start := time.Now()
	e, err := sb.Exec(ctx, sandbox.ExecRequest{
		Command: h.Command, Timeout: time.Duration(h.Timeout * float64(time.Second)),
		OutputLimit: outputLimit, Actor: h.owner,
	})
	if err != nil {
		detail["error"] = fault.Public(err)
	} else {
		r := e.Result()
		verdict = r.Status
		if r.ExitCode != nil {
			detail["exit_code"] = *r.ExitCode
		}
		if r.Reason != "" {
			detail["kill_reason"] = r.Reason
		}
	}
	detail["duration_ms"] = time.Since(start).Milliseconds()
	if s.audit != nil {
		_, _ = s.audit.Append(context.WithoutCancel(ctx), audit.Entry{Actor: h.owner, Action: "sandbox.hook",
			Target: h.Name, Sandbox: sb.ID(), Verdict: verdict, Detail: detail})
	}
}
