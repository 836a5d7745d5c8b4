package daemon

import (
	"context"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/mcp"
)

// startMCP serves MCP at /mcp over the dispatcher: sessions are bound to
// their key and end when the key is revoked (here, or by the CLI while the
// server runs: the auth service's revocation watch).
func (d *Daemon) startMCP(_ context.Context) error {
	h := mcp.New(mcp.Options{
		Dispatcher: d.dispatch,
		Logger:     d.log,
		Version:    d.version,
		MaxBody:    d.cfg.MaxBody.Bytes(),
		WriteError: api.WriteError,
	})
	d.auth.OnRevoke(h.Revoke)
	d.api.MCPRoutes(h)
	d.AddCloser(func() error { h.Close(); return nil })
	return nil
}
