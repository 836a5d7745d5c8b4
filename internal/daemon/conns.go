package daemon

import (
	"net"
	"net/http"
	"strings"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/connlimit"
	"github.com/sandhold/sandhold/internal/fault"
)

// limitConns bounds the connections srv holds (SANDBOX_MAX_CONNECTIONS;
// connlimit says how): at the cap keep-alives go off, which closes idle
// connections at once and every other one after its answer, until the
// count is down to half.
func (d *Daemon) limitConns(ln net.Listener, srv *http.Server) net.Listener {
	maxConns := d.cfg.MaxConnections
	if maxConns <= 0 {
		maxConns = connlimit.DefaultMax()
	}
	d.inflight.max = d.cfg.MaxConnectionsPerKey
	return connlimit.Wrap(ln, connlimit.Options{Max: maxConns,
		Pressure: func() {
			d.log.Warn("connections at their cap: keep-alives off, idle connections closed; beyond it only /healthz and /v1/control answer",
				"max_connections", maxConns)
			srv.SetKeepAlivesEnabled(false)
		},
		Relief: func() {
			d.log.Info("connections below half their cap: keep-alives on again", "max_connections", maxConns)
			srv.SetKeepAlivesEnabled(true)
		},
	})
}

// controlPath reports whether r may use the connections reserved beyond
// the cap: the health check and HALT's routes (their roles are checked as
// usual), so the operator can see and stop a server under a flood.
func controlPath(r *http.Request) bool {
	p := r.URL.Path
	return p == "/healthz" || p == "/v1/control" || strings.HasPrefix(p, "/v1/control/")
}

func refuseOverflow(w http.ResponseWriter, r *http.Request) {
	api.WriteError(w, r, fault.WithRetryAfter(fault.Unavailable, 1, "the server holds all the connections it serves at once; retry shortly"))
}
