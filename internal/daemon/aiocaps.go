package daemon

import (
	"context"
	"time"

	"github.com/sandhold/sandhold/internal/convert"
	"github.com/sandhold/sandhold/internal/hooks"
	"github.com/sandhold/sandhold/internal/skills"
	"github.com/sandhold/sandhold/internal/workspace"
)

// serverStopHooks bounds the shutdown hooks of all sandboxes together when
// the server stops (they run at once, before the sandboxes are stopped).
const serverStopHooks = 30 * time.Second

// startAIOCaps wires the AIO namespaces that are capabilities of their
// own: util/convert_to_markdown (internal/convert), skills
// (internal/skills) and the sandbox's lifecycle hooks (internal/hooks).
func (d *Daemon) startAIOCaps(_ context.Context) error {
	pol := workspace.DefaultPolicy()
	convert.New(d.sandboxes.Resolve, pol).Register(d.dispatch)
	skills.New(d.sandboxes.Resolve, pol).RegisterTools(d.dispatch)

	hk := hooks.New(d.sandboxes.Resolve, d.audit)
	hk.RegisterTools(d.dispatch, d.guard)
	d.sandboxes.BeforeStop(hk.Run)
	d.onRevoke(hk.Revoke)
	// Closers run in reverse order: this one before the sandbox manager's.
	d.closers = append(d.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), serverStopHooks)
		defer cancel()
		hk.RunAll(ctx, d.sandboxes.All())
		return nil
	})
	return nil
}
