package daemon

import (
	"context"

	"github.com/sandhold/sandhold/internal/transfer"
)

// startTransfer wires bulk data movement: streamed upload and download,
// archive extraction and packing, and resumable artifacts — their tools in
// the dispatcher and their routes. Uploads are capped by each sandbox's
// workspace quota (the kernel's: see internal/sandbox's quota), not by
// SANDBOX_MAX_BODY or SANDBOX_MAX_FILE_SIZE, which are for JSON calls.
func (d *Daemon) startTransfer(_ context.Context) error {
	svc := transfer.New(d.sandboxes, transfer.Config{Log: d.log})
	svc.Register(d.dispatch)
	d.api.TransferRoutes(d.dispatch)
	return nil
}
