package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sandhold/sandhold/internal/fault"
)

// Cross-tenant starvation: for every kernel resource counted per user or
// host-wide rather than per cgroup, sandbox A takes all it can and
// sandbox B and the server (this process, host root) are still served.
// SECURITY.md, "Shared kernel resources", says what bounds each.

// hold starts a background command in s that takes what it can of a
// resource, prints one line once it holds it, and keeps it until killed;
// it returns that line.
func hold(t *testing.T, s *Sandbox, script string) string {
	t.Helper()
	e, err := s.Exec(context.Background(), ExecRequest{Argv: []string{"python3", "-c", script}, Background: true, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Kill(); <-e.Done() })
	for {
		ch, closed := e.Stdout.Wait()
		if text, _ := e.Stdout.Text(); strings.Contains(text, "\n") {
			return strings.TrimSpace(text)
		}
		if closed {
			stderr, _ := e.Stderr.Text()
			t.Fatalf("the holder ended before it held anything: %s", stderr)
		}
		select {
		case <-ch:
		case <-e.Done():
		}
	}
}

// twoTenants makes a manager with two sandboxes, A and B, of two keys.
func twoTenants(t *testing.T, cfg Config) (a, b *Sandbox) {
	t.Helper()
	m := newManager(t, cfg, nil)
	a = create(t, m, Spec{})
	info, err := m.Create(context.Background(), Caller{KeyID: "key-b"}, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = m.Get(Caller{KeyID: "key-b"}, info.ID); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// ptyHog opens terminals until the kernel refuses and prints how many it
// got and the refusal.
const ptyHog = `import os, errno, time
fds = []
while True:
    try:
        fds.append(os.openpty())
    except OSError as e:
        print(len(fds), errno.errorcode[e.errno], flush=True)
        break
time.sleep(600)`

func TestTenantCannotStarveOthersOfPTYs(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxPTYs = 6
	a, b := twoTenants(t, cfg)
	if got := hold(t, a, ptyHog); got != "6 ENOSPC" {
		t.Fatalf("A held %q terminals, want its cap: 6 ENOSPC", got)
	}
	// A's own shell session: 429 with a reason, not a 500.
	_, err := a.Spawn(context.Background(), SpawnSpec{Argv: []string{"/bin/sh"}, TTY: true})
	if !fault.Is(err, fault.RateLimited) || fault.RetryAfterOf(err) == 0 || !strings.Contains(fault.Public(err), "SANDBOX_MAX_PTYS") {
		t.Fatalf("A's terminal at its cap: %v (kind %s), want rate_limited naming SANDBOX_MAX_PTYS", err, fault.KindOf(err))
	}
	// B: a session from the server and a terminal of its own.
	p, err := b.Spawn(context.Background(), SpawnSpec{Argv: []string{"/bin/sh"}, TTY: true})
	if err != nil {
		t.Fatalf("B's terminal while A holds all of its own: %v", err)
	}
	p.Kill()
	<-p.Exited()
	p.Release()
	if r := run(t, b, ExecRequest{Argv: []string{"python3", "-c", "import os; os.openpty(); print('ok')"}}); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("B's own openpty: %+v", r)
	}
	// The server (host root).
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("the server's own terminal: %v", err)
	}
	_ = ptmx.Close()
	_ = tty.Close()
}
