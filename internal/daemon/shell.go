package daemon

import (
	"context"

	"github.com/sandhold/sandhold/internal/api/aio"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/shell"
)

// startShell wires the shell capabilities (AIO's /v1/shell, /v1/shell/ws,
// /v1/bash and /v1/sandbox): the session service over the sandbox manager,
// its tools in the dispatcher and its routes. Revoking a key ends its
// terminals and sessions; sessions end before the sandbox manager closes
// (closers run in reverse order).
func (d *Daemon) startShell(_ context.Context) error {
	// The sessions audit a command's end (shell.finish, bash.finish): an
	// outcome, like the dispatcher's <tool>.outcome, whose command's own
	// record was durable before it started. It rides the next commit
	// instead of syncing one of its own, which the next call would wait
	// behind (SECURITY.md, "A command's record goes first").
	auditFn := func(ctx context.Context, e audit.Entry) {
		if err := d.audit.Post(ctx, e); err != nil {
			d.log.Error("audit", "action", e.Action, "err", err)
		}
	}
	svc := shell.New(d.sandboxes, shell.Options{Limiter: d.limiter, Log: d.log, Audit: auditFn,
		ImplicitIdle: d.sessionTimers[0], ReapEvery: d.sessionTimers[1]})
	d.closers = append(d.closers, func() error { svc.Close(); return nil })
	d.onRevoke(svc.Revoke)
	for _, t := range shell.Tools(shell.Deps{Service: svc, Sandboxes: d.sandboxes, Guard: d.guard, Version: d.version}) {
		d.dispatch.MustRegister(t)
	}
	aio.ShellRoutes(d.api, d.dispatch)
	return nil
}
