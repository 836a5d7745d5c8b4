// Package daemontest starts the real server for end-to-end tests: the
// daemon on 127.0.0.1:0 with a fresh data dir, stopped when the test ends.
// The test package must run its tests through agenttest.Main, since the
// server's sandboxes re-execute the test binary as their init.
package daemontest

import (
	"context"
	"io"
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
	cfg := config.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DisableRateLimit: true}
	if mutate != nil {
		mutate(&cfg)
	}
	opts = append([]daemon.Option{
		daemon.WithLogger(daemon.NewLogger(io.Discard, "error")),
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
