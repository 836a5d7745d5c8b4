package daemon

import (
	"context"

	"github.com/sandhold/sandhold/internal/e2b"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/workspace"
)

// startE2B wires E2B's API (internal/e2b): its e2b.* tools in the
// dispatcher, the control plane under /e2b and the in-sandbox API under
// /e2b/sandbox. Its processes end with their sandbox, their key and the
// server (before the sandbox manager closes: closers run in reverse).
func (d *Daemon) startE2B(_ context.Context) error {
	svc := e2b.New(e2b.Deps{API: d.api, Dispatch: d.dispatch, Sandboxes: d.sandboxes, Auth: d.auth, Store: d.store,
		Templates: d.templates, Files: workspace.DefaultPolicy(), Guard: d.guard, ContentDomain: d.cfg.ContentDomain, Log: d.log})
	d.closers = append(d.closers, func() error { svc.Close(); return nil })
	d.onRevoke(svc.Revoke)
	d.register(svc.Tools())
	svc.Mount()
	d.sandboxes.BeforeStop(func(_ context.Context, s *sandbox.Sandbox, _ string) { svc.EndSandbox(s.ID()) })
	return nil
}
