package daemon

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/api/aio"
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
	if err := d.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "sandhold", Subsystem: "mcp", Name: "sessions",
		Help: "Open MCP sessions (streamable HTTP, all keys).",
	}, func() float64 { return float64(h.Sessions()) })); err != nil {
		return fmt.Errorf("mcp metrics: %w", err)
	}
	d.auth.OnRevoke(h.Revoke)
	d.api.MCPRoutes(h)
	aio.MCPRoutes(d.api)
	d.AddCloser(func() error { h.Close(); return nil })
	return nil
}
