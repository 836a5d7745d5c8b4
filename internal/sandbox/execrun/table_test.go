package execrun

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/outbuf"
)

// fakeHost is a sandbox without an init: enough for what the table decides
// before a command is spawned and after it ended.
type fakeHost struct {
	lim     Limits
	budget  *outbuf.Budget
	touched int
}

func (h *fakeHost) Ensure(context.Context) (*agent.Instance, error) {
	return nil, errors.New("no init here")
}
func (h *fakeHost) Limits() Limits                                  { return h.lim }
func (h *fakeHost) Shell() string                                   { return "/bin/sh" }
func (h *fakeHost) DefaultCwd() string                              { return "/home/user" }
func (h *fakeHost) BaseEnv() map[string]string                      { return map[string]string{"PATH": "/usr/bin:/bin"} }
func (h *fakeHost) NetEnv(user map[string]string) map[string]string { return user }
func (h *fakeHost) NewOutput(limit int) *outbuf.Output              { return h.budget.NewOutput("owner", limit) }
func (h *fakeHost) Touch()                                          { h.touched++ }
func (h *fakeHost) FirstCommandEnded()                              {}
func (h *fakeHost) Observe(string)                                  {}
func (h *fakeHost) Capped(limit int, msg string) error {
	return fault.New(fault.RateLimited, msg)
}
func (h *fakeHost) Audit(context.Context, string, string, string, map[string]any) {}

func newTable(lim Limits, allowSudo bool) (*Table, *fakeHost) {
	h := &fakeHost{lim: lim, budget: outbuf.NewBudget(1<<30, 1<<30)}
	return New(h, Config{ID: "sb0123456789", MaxExecs: 4, AllowSudo: allowSudo, Log: slog.Default()}), h
}

// TestCheckRefusesBadRequestsAndFillsDefaults: every rule of a request,
// each refused with the field it names; a good request gets the shell,
// the default directory, timeout and output limit.
func TestCheckRefusesBadRequestsAndFillsDefaults(t *testing.T) {
	tb, _ := newTable(Limits{}, false)
	bad := []struct {
		name  string
		req   ExecRequest
		field string
	}{
		{"both", ExecRequest{Command: "true", Argv: []string{"true"}}, "command"},
		{"neither", ExecRequest{}, "command"},
		{"long command", ExecRequest{Command: strings.Repeat("x", maxCommandBytes+1)}, "command"},
		{"nul in command", ExecRequest{Command: "a\x00b"}, "command"},
		{"nul in argv", ExecRequest{Argv: []string{"a", "b\x00"}}, "argv"},
		{"empty argv0", ExecRequest{Argv: []string{""}}, "argv"},
		{"relative cwd", ExecRequest{Command: "true", Cwd: "work"}, "cwd"},
		{"timeout too long", ExecRequest{Command: "true", Timeout: MaxTimeout + time.Second}, "timeout"},
		{"negative timeout", ExecRequest{Command: "true", Timeout: -time.Second}, "timeout"},
		{"output limit", ExecRequest{Command: "true", OutputLimit: MaxOutputLimit + 1}, "output_limit"},
		{"stdin", ExecRequest{Command: "true", Stdin: make([]byte, MaxStdin+1)}, "stdin"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			r := c.req
			_, _, err := tb.Check(&r)
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Kind != fault.Invalid || fe.Field != c.field {
				t.Fatalf("got %v, want an invalid %s", err, c.field)
			}
		})
	}
	r := ExecRequest{Command: "true", Sudo: true}
	if _, _, err := tb.Check(&r); !errors.Is(err, errSudo) {
		t.Fatalf("sudo on a server without it: %v", err)
	}

	r = ExecRequest{Command: "echo hi"}
	argv, env, err := tb.Check(&r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(argv, "|") != "/bin/sh|-c|echo hi" || r.Cwd != "/home/user" || r.Timeout != DefaultTimeout || r.OutputLimit != DefaultOutputLimit {
		t.Fatalf("filled: argv %q, request %+v", argv, r)
	}
	if !strings.Contains(strings.Join(env, " "), "PATH=/usr/bin:/bin") {
		t.Fatalf("env %q lacks the base environment", env)
	}
}

// TestBackgroundInATTLSandboxHasNoWallTimer: a background command that
// asked for no timeout runs without a wall timer only where a TTL bounds
// it; a foreground one always gets the default.
func TestBackgroundInATTLSandboxHasNoWallTimer(t *testing.T) {
	ttl, _ := newTable(Limits{TTL: time.Hour}, false)
	plain, _ := newTable(Limits{}, false)
	for _, c := range []struct {
		tb   *Table
		req  ExecRequest
		want time.Duration
	}{
		{ttl, ExecRequest{Command: "true", Background: true}, 0},
		{ttl, ExecRequest{Command: "true"}, DefaultTimeout},
		{plain, ExecRequest{Command: "true", Background: true}, DefaultTimeout},
	} {
		r := c.req
		if _, _, err := c.tb.Check(&r); err != nil || r.Timeout != c.want {
			t.Fatalf("%+v: timeout %v (%v), want %v", c.req, r.Timeout, err, c.want)
		}
	}
}

// TestAcquireRefusesWithoutAnInit: no execution group is handed out while
// no init runs.
func TestAcquireRefusesWithoutAnInit(t *testing.T) {
	tb, _ := newTable(Limits{}, false)
	if _, _, err := tb.Acquire(); !fault.Is(err, fault.Conflict) {
		t.Fatalf("acquire in a stopped sandbox: %v", err)
	}
}

// started registers an execution as Exec does, with a cancel that ends it
// as supervise would.
func started(tb *Table, h *fakeHost, actor string) *Execution {
	e := &Execution{Sandbox: tb.cfg.ID, Started: time.Now(), Stdout: h.NewOutput(100), Stderr: h.NewOutput(100),
		done: make(chan struct{}), status: StatusRunning, actor: actor}
	e.cancel = func(reason string) {
		e.mu.Lock()
		if e.status == StatusRunning {
			e.status, e.reason = StatusKilled, reason
			e.mu.Unlock()
			tb.finish(e)
			close(e.done)
			return
		}
		e.mu.Unlock()
	}
	tb.register(e)
	return e
}

// TestKillOfEndsOnlyTheActorsExecutions: a revoked key's executions end,
// the others run on; KillAll ends the rest.
func TestKillOfEndsOnlyTheActorsExecutions(t *testing.T) {
	tb, h := newTable(Limits{}, false)
	a1, a2, b := started(tb, h, "a"), started(tb, h, "a"), started(tb, h, "b")
	if a1.ID != "01234567-1" || b.ID != "01234567-3" {
		t.Fatalf("ids %q, %q", a1.ID, b.ID)
	}
	if n := tb.KillOf("a", "key revoked"); n != 2 {
		t.Fatalf("killed %d, want 2", n)
	}
	for _, e := range []*Execution{a1, a2} {
		if r := e.Result(); r.Status != StatusKilled || r.Reason != "key revoked" || r.ExitCode == nil {
			t.Fatalf("a's execution: %+v", r)
		}
	}
	if r := b.Result(); r.Status != StatusRunning || r.ExitCode != nil || tb.Running() != 1 || !tb.Busy() {
		t.Fatalf("b's execution: %+v, %d running", r, tb.Running())
	}
	tb.KillAll("halt")
	if b.Status() != StatusKilled || tb.Running() != 0 || tb.Busy() {
		t.Fatalf("after KillAll: %s, %d running", b.Status(), tb.Running())
	}
	if got, err := tb.Execution(b.ID); err != nil || got != b {
		t.Fatalf("finished execution not found: %v", err)
	}
}

// TestFinishedExecutionsAreBoundedAndTheirOutputReleased: past
// maxFinishedExecs the oldest is forgotten and its bytes leave the output
// budget; Forget forgets the rest and starts the ids again.
func TestFinishedExecutionsAreBoundedAndTheirOutputReleased(t *testing.T) {
	tb, h := newTable(Limits{}, false)
	first := started(tb, h, "a")
	_, _ = first.Stdout.Write([]byte("0123456789"))
	first.Kill()
	_, before := h.budget.Used("owner")
	if before == 0 {
		t.Fatal("the output was not charged")
	}
	for range maxFinishedExecs {
		started(tb, h, "a").Kill()
	}
	if _, err := tb.Execution(first.ID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("the oldest finished execution is still found: %v", err)
	}
	if _, after := h.budget.Used("owner"); after >= before {
		t.Fatalf("budget used %d after forgetting, %d before", after, before)
	}
	tb.Forget()
	if _, err := tb.Execution("01234567-2"); !fault.Is(err, fault.NotFound) {
		t.Fatalf("a forgotten execution is still found: %v", err)
	}
	if e := started(tb, h, "a"); e.ID != "01234567-1" {
		t.Fatalf("id after Forget: %q", e.ID)
	}
	if h.touched == 0 {
		t.Fatal("the sandbox was never marked used")
	}
}

// TestAuditedCommandLine: a shell command is audited as written, an argv
// joined.
func TestAuditedCommandLine(t *testing.T) {
	if got := auditCommand([]string{"/bin/bash", "-c", "echo hi"}); got != "echo hi" {
		t.Fatal(got)
	}
	if got := auditCommand([]string{"ls", "-l", "/"}); got != "ls -l /" {
		t.Fatal(got)
	}
}
