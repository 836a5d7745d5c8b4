package daemon

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandhold/sandhold/internal/api/aio"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/egress"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/sandbox/proxytools"
	"github.com/sandhold/sandhold/internal/sandbox/sandboxtools"
)

// egressAction is the audit action of one proxied connection attempt.
const egressAction = "network.connect"

// startEgress wires network egress: the host-side egress proxy (network
// mode proxy) with its audit records and metrics, network.update and PUT
// /v1/sandboxes/{id}/network.
func (d *Daemon) startEgress(ctx context.Context, met *netMetrics) error {
	var opts egress.Options
	opts.OnEvent = func(e egress.Event) {
		met.verdicts.WithLabelValues(e.Verdict).Inc()
		met.bytes.WithLabelValues("up").Add(float64(e.BytesUp))
		met.bytes.WithLabelValues("down").Add(float64(e.BytesDown))
		d.sandboxes.NoteEgress(e.Sandbox, e.Verdict == egress.VerdictAllowed, e.BytesUp, e.BytesDown)
		verdict := audit.Allow
		if e.Verdict != egress.VerdictAllowed {
			verdict = audit.Deny
		}
		// Every attempt is audited, allowed or not. The append blocks the
		// connection's own goroutine only, which also slows a sandbox that
		// floods the proxy with refused connections.
		detail := map[string]any{"host": e.Host, "port": e.Port, "bytes_up": e.BytesUp, "bytes_down": e.BytesDown, "by": "sandbox"}
		if e.Reason != "" {
			detail["reason"] = e.Reason
		}
		// The route (AIO's proxy namespace: upstream, mappings); the
		// upstream is host:port, never its credentials.
		for k, v := range map[string]string{"route": e.Route, "via": e.Via, "mapped_from": e.MappedFrom} {
			if v != "" {
				detail[k] = v
			}
		}
		// The actor is the sandbox's owner, so an agent finds its own
		// sandboxes' connections in GET /v1/audit.
		actor := "system"
		if sb, err := d.sandboxes.Get(sandbox.Caller{Admin: true}, e.Sandbox); err == nil {
			actor = sb.Owner()
		}
		if _, err := d.audit.Append(context.WithoutCancel(ctx), audit.Entry{Actor: actor, Action: egressAction,
			Target: fmt.Sprintf("%s:%d", e.Host, e.Port), Sandbox: e.Sandbox, Verdict: verdict, Detail: detail}); err != nil {
			d.log.Error("audit", "action", egressAction, "err", err)
		}
	}
	// Each sandbox's proxy routing (upstream, mappings, excludes) is kept
	// in the data dir, so a restart finds it when the policies are set.
	opts.StateDir = filepath.Join(d.cfg.DataDir, "egress")
	// Mappings to a sandbox's own port reach it through its init, on the
	// ports the server opens into sandboxes (DialPort checks them).
	opts.DialSandbox = func(ctx context.Context, id string, port uint16) (net.Conn, error) {
		return d.sandboxes.DialPort(ctx, sandbox.Caller{Admin: true}, id, int(port))
	}
	opts.SandboxPorts = sandbox.LoopbackPorts(d.cfg.PreviewPorts)
	proxy := egress.New(opts)
	if err := d.sandboxes.EnableNetwork(sandbox.NetworkOptions{Egress: proxy, HostAllowed: d.cfg.NetworkUnrestricted}); err != nil {
		return err
	}
	if err := proxy.PruneState(); err != nil {
		d.log.Warn("egress routing state of removed sandboxes", "err", err)
	}
	// SANDBOX_NETWORK_RESTRICTED=false is logged and audited with the
	// other loosenings (config.Loosenings); it makes mode host available to
	// admins. The default mode of a sandbox stays none either way.
	d.register(sandboxtools.NetworkTools(d.sandboxes))
	d.api.NetworkRoutes(d.dispatch)
	d.register(proxytools.Tools(d.sandboxes, proxy))
	aio.ProxyRoutes(d.api, d.dispatch)
	return nil
}

// startMetrics registers the Prometheus figures of egress, sandboxes and
// executions, and counts finished executions; startEgress feeds the
// egress ones.
func (d *Daemon) startMetrics() (*netMetrics, error) {
	met, err := newNetMetrics(d.registry, d.sandboxes)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	d.sandboxes.OnExecutionEnd(func(status string) { met.execs.WithLabelValues(status).Inc() })
	return met, nil
}

// netMetrics are the egress, sandbox and execution figures.
type netMetrics struct {
	verdicts *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	execs    *prometheus.CounterVec
}

func newNetMetrics(reg prometheus.Registerer, m *sandbox.Manager) (*netMetrics, error) {
	met := &netMetrics{
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sandhold", Subsystem: "egress", Name: "connections_total",
			Help: "Egress proxy connection attempts by verdict (allowed, denied).",
		}, []string{"verdict"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sandhold", Subsystem: "egress", Name: "bytes_total",
			Help: "Bytes relayed by the egress proxy, by direction (up: to the upstream).",
		}, []string{"direction"}),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sandhold", Subsystem: "sandbox", Name: "executions_total",
			Help: "Finished executions by status (completed, timed_out, killed).",
		}, []string{"status"}),
	}
	for _, c := range []prometheus.Collector{met.verdicts, met.bytes, met.execs, newLiveCollector(m)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return met, nil
}

// liveCollector reports the sandboxes by state and the running executions
// at scrape time.
type liveCollector struct {
	m                      *sandbox.Manager
	sandboxesDesc, running *prometheus.Desc
}

func newLiveCollector(m *sandbox.Manager) *liveCollector {
	return &liveCollector{m: m,
		sandboxesDesc: prometheus.NewDesc("sandhold_sandboxes", "Sandboxes by state (running, paused, stopped).", []string{"state"}, nil),
		running:       prometheus.NewDesc("sandhold_executions_running", "Executions running now.", nil, nil),
	}
}

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sandboxesDesc
	ch <- c.running
}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	states := map[sandbox.State]int{sandbox.Running: 0, sandbox.Paused: 0, sandbox.Stopped: 0}
	running := 0
	for _, s := range c.m.All() {
		states[s.State()]++
		running += s.RunningExecutions()
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(c.sandboxesDesc, prometheus.GaugeValue, float64(n), string(st))
	}
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(running))
}
