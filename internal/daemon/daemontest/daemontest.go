// Package daemontest starts the real server for end-to-end tests: the
// daemon on 127.0.0.1:0 with a fresh data dir, stopped when the test ends.
// The test package must run its tests through agenttest.Main, since the
// server's sandboxes re-execute the test binary as their init.
package daemontest

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/testenv"
)

// RequireSandboxes skips unless this process can build sandboxes, and
// under -short (make unit): testenv.RequireSandboxes.
func RequireSandboxes(t testing.TB) {
	t.Helper()
	testenv.RequireSandboxes(t)
}

// Start runs a daemon with rate limits off (tests drive many calls) and
// whatever mutate changes, and stops it at the end of the test. opts are
// passed to daemon.New after the quiet logger.
func Start(t testing.TB, mutate func(*config.Config), opts ...daemon.Option) *daemon.Daemon {
	t.Helper()
	RequireSandboxes(t)
	// The disk budget is lifted: by default it is a share of the data dir's
	// free space, so how many sandboxes a test may hold would depend on the
	// build machine's disk (the workspaces are sparse images and tests write
	// little into them). Tests of the budget set their own.
	cfg := config.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DisableRateLimit: true, DiskBudget: 1 << 40}
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &tail{max: logTail}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the server's warnings (last %d bytes):\n%s", logTail, logs)
		}
	})
	opts = append([]daemon.Option{
		daemon.WithLogger(daemon.NewLogger(logs, "warn")),
		daemon.WithStderr(io.Discard),
		daemon.WithVersion("test"),
	}, opts...)
	d, err := daemon.New(cfg, opts...)
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("run daemon: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run daemon: %v", err)
		}
	})
	return d
}

// logTail is how much of the server's warnings a failed test prints.
const logTail = 16 << 10

// tail keeps the last max bytes written to it.
type tail struct {
	// mu guards b.
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
