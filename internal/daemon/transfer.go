package daemon

import (
	"context"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/api/aio"
	"github.com/sandhold/sandhold/internal/transfer"
	"github.com/sandhold/sandhold/internal/workspace"
)

// startTransfer wires bulk data movement: streamed upload and download,
// archive extraction and packing, and resumable artifacts — their tools in
// the dispatcher and their routes. Uploads are capped by each sandbox's
// workspace quota (the kernel's: see internal/sandbox's quota), not by
// SANDBOX_MAX_BODY or SANDBOX_MAX_FILE_SIZE, which are for JSON calls. The
// sensitive-path policy is the file API's (workspace.DefaultPolicy).
func (d *Daemon) startTransfer(_ context.Context) error {
	pol := workspace.DefaultPolicy()
	svc := transfer.New(d.sandboxes, transfer.Config{
		Log:  d.log,
		Deny: agent.Deny{Names: pol.Names, Dirs: pol.Dirs, Paths: pol.Paths, Procs: true},
	})
	d.register(transfer.Tools(svc))
	aio.TransferRoutes(d.api, d.dispatch)
	return nil
}
