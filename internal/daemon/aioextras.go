package daemon

import (
	"context"
	"time"

	"github.com/sandhold/sandhold/internal/api/aio"
	"github.com/sandhold/sandhold/internal/convert"
	"github.com/sandhold/sandhold/internal/hooks"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/observe"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/skills"
	"github.com/sandhold/sandhold/internal/workspace"
)

// serverStopHooks bounds the shutdown hooks of all sandboxes together when
// the server stops (they run at once, before the sandboxes are stopped).
const serverStopHooks = 30 * time.Second

// startAIOExtras wires the AIO namespaces served by packages of their own
// beside files, shell, code and browser: util/convert_to_markdown
// (internal/convert), skills (internal/skills), the sandbox's lifecycle
// hooks (internal/hooks) and its observation sessions and reports
// (internal/observe). (api still calls their route group "caps"; they are
// not Linux capabilities, which internal/isolate/caps drops.)
func (d *Daemon) startAIOExtras(_ context.Context) error {
	pol := workspace.DefaultPolicy()
	d.register(convert.New(d.sandboxes.Resolve, pol).Tools())
	d.register(skills.New(d.sandboxes.Resolve, pol).Tools())

	hk := hooks.New(d.sandboxes.Resolve, d.audit)
	d.register(hk.Tools(d.guard))
	d.onRevoke(hk.Revoke)

	obs := observe.New(d.sandboxes.Resolve, d.cgroupStats, d.audit)
	d.register(obs.Tools())
	d.sandboxes.BeforeStop(func(ctx context.Context, s *sandbox.Sandbox, reason string) {
		hk.Run(ctx, s, reason)
		if reason == "delete" {
			obs.Forget(s.ID())
		}
	})
	aio.ServiceRoutes(d.api, d.dispatch)
	// Closers run in reverse order: this one before the sandbox manager's.
	d.closers = append(d.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), serverStopHooks)
		defer cancel()
		hk.RunAll(ctx, d.sandboxes.All())
		obs.Close()
		return nil
	})
	return nil
}

// cgroupStats are a sandbox's live cgroup figures (observe's samples).
func (d *Daemon) cgroupStats(id string) (cgroup.Stats, bool) {
	for _, st := range d.sandboxes.Resources(sandbox.Caller{Admin: true}) {
		if st.ID == id {
			return st.Cgroup, st.State != sandbox.Stopped
		}
	}
	return cgroup.Stats{}, false
}
