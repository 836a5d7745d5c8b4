package main

import (
	"context"
	"fmt"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/daemon"
)

type serveCmd struct {
	serverFlags         `embed:""`
	Listen              string `help:"Listen address (default 127.0.0.1:8080; SANDBOX_LISTEN)."`
	InsecureNoIsolation bool   `name:"insecure-no-isolation" help:"Start even when sandboxes cannot be isolated (SANDBOX_INSECURE_NO_ISOLATION). Loud, audited."`
}

func (s *serveCmd) Run(ctx context.Context, e *env) error {
	// Whatever the process that started the server left open and
	// inheritable (a shell's `9</etc/shadow`, a CI runner's pipe) must
	// never reach a sandbox: marked close-on-exec before anything starts.
	if err := fds.CloseOnExecFrom(3); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	flags := map[string]string{}
	if s.Listen != "" {
		flags["listen"] = s.Listen
	}
	if s.InsecureNoIsolation {
		flags["insecure_no_isolation"] = "true"
	}
	cfg, err := e.loadConfig(s.serverFlags, flags)
	if err != nil {
		return err
	}
	d, err := daemon.New(cfg, daemon.WithStderr(e.stderr), daemon.WithVersion(version),
		daemon.WithLogger(daemon.NewLogger(e.stderr, cfg.LogLevel)))
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	return d.Run(ctx)
}
