package daemon

import (
	"context"
	"fmt"

	"github.com/sandhold/sandhold/internal/api/aio"
	"github.com/sandhold/sandhold/internal/approvals"
	"github.com/sandhold/sandhold/internal/cluster"
	"github.com/sandhold/sandhold/internal/control"
	"github.com/sandhold/sandhold/internal/customtool"
	"github.com/sandhold/sandhold/internal/dispatch/audittools"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"
	"github.com/sandhold/sandhold/internal/dispatch/ratetools"
	"github.com/sandhold/sandhold/internal/policy"
)

// startGovernance puts the operator's controls into the dispatcher: the
// stored risk policy (and its per-role/per-key rate limits), approvals,
// the stored HALT state (a halted server freezes its sandboxes again
// here), the stored custom tools (registered bottom-up), the foundation's
// routes as tools, and the routes of all of them.
// A stored policy or HALT state that cannot be read stops the start: a
// server must not come up looser than it went down.
func (d *Daemon) startGovernance(ctx context.Context) error {
	pol, err := policy.Load(ctx, d.store)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	d.dispatch.SetPolicy(pol)
	d.dispatch.SetRateRules(pol.RateRules)
	d.register(ratetools.Tools(d.limiter))
	d.register(policy.Tools(pol))

	var aopts approvals.Options
	if cl := d.store.Cluster(); cl != nil { // a cluster: every node sees and decides the same approvals
		aopts.Shared = cl
	}
	apr := approvals.New(aopts)
	d.dispatch.SetApprovals(apr)
	d.register(approvals.Tools(apr))

	ctl, err := control.Load(ctx, d.store, d.sandboxes)
	if err != nil {
		return fmt.Errorf("halt state: %w", err)
	}
	if st := ctl.State(); st.Halted {
		d.log.Warn("HALTED: the server starts halted; only control and read-only views run until an admin unhalts", "reason", st.Reason, "since", st.Since)
	}
	d.dispatch.SetHalt(ctl)
	d.register(control.Tools(ctl))

	tools, problems, err := customtool.Load(ctx, d.dispatch, d.store)
	if err != nil {
		return fmt.Errorf("custom tools: %w", err)
	}
	for _, p := range problems {
		d.log.Warn("custom tool not loaded", "err", p)
	}
	// An approval approves a definition: redefining a tool (or one it
	// calls) voids its pending and granted approvals.
	tools.OnRedefine(func(names []string) {
		if n, err := apr.Void(names...); err != nil {
			d.log.Error("void the approvals of redefined custom tools", "tools", names, "err", err)
		} else if n > 0 {
			d.log.Info("approvals voided: their custom tools were redefined", "tools", names, "voided", n)
		}
	})
	d.register(customtool.Tools(tools))

	// Nodes sharing a PostgreSQL store follow each other's HALT, policy and
	// custom tools.
	if cl := d.store.Cluster(); cl != nil {
		fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := cluster.Follow(fctx, cl, d.log, map[string]cluster.Reloader{
			control.SettingKey: ctl.Refresh, policy.SettingKey: pol.Reload, customtool.SettingKey: tools.Reload})
		d.closers = append(d.closers, func() error { stop(); <-done; return nil })
	}

	d.api.UseDispatcher(d.dispatch)
	aio.AuthRoutes(d.api)
	d.register(authtools.Tools(d.auth))
	d.register(audittools.Tools(d.audit))
	d.register(aio.AuthTools())
	d.api.PolicyRoutes()
	d.api.ApprovalRoutes()
	d.api.ControlRoutes()
	d.api.ToolRoutes()
	return nil
}
