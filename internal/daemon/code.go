package daemon

import (
	"context"
	"slices"

	"github.com/sandhold/sandhold/internal/api/aio"
	"github.com/sandhold/sandhold/internal/coderun"
)

// startCode wires code execution (AIO's /v1/code and /v1/jupyter): the
// session service over the sandbox manager, its tools in the dispatcher
// and its routes. Sessions end before the sandbox manager closes (closers
// run in reverse order).
func (d *Daemon) startCode(_ context.Context) error {
	svc := coderun.New(coderun.Config{Log: d.log}, d.sandboxes)
	d.closers = append(d.closers, func() error { svc.Close(); return nil })
	d.onRevoke(svc.Revoke)
	for _, t := range slices.Concat(coderun.Tools(svc, d.guard), coderun.NodeTools(svc, d.guard)) {
		d.dispatch.MustRegister(t)
	}
	aio.CodeRoutes(d.api, d.dispatch, aio.CodeConfig{IdleTimeout: svc.IdleTimeout(), MaxSessions: svc.MaxSessions()})
	aio.NodeRoutes(d.api, d.dispatch)
	return nil
}
