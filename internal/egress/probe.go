package egress

// Diagnose and Health: what the routing of a sandbox does with a URL, and
// whether its proxy and upstream work — found out by doing it (the same
// plan a connection gets, an actual connect with a short timeout), not by
// reading configuration back.

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ProbeTimeout bounds each connect of Diagnose and Health.
const ProbeTimeout = 3 * time.Second

// Diagnosis is how a URL would be routed for a sandbox.
type Diagnosis struct {
	URL string
	// Mapping is the mapping that applies, if any.
	Mapping *Mapping
	// Target is the destination connected to (host:port) after mapping.
	Target string
	// Route is RouteDirect, RouteUpstream, RouteSandbox or RouteDenied.
	Route string
	// Via is the upstream's host:port on RouteUpstream.
	Via string
	// Reason says why the route was refused, or why the connect failed.
	Reason string
	// Reachable: a connection along the route was opened (through the
	// upstream: the upstream accepted the CONNECT).
	Reachable bool
}

// Diagnose routes rawURL (http, https, ws or wss; the port from the
// scheme when absent) as a connection of the sandbox would be, and tries
// to connect. The connect is reported to OnEvent like any connection of
// the sandbox.
func (p *Proxy) Diagnose(ctx context.Context, sandboxID, rawURL string) (Diagnosis, error) {
	d := Diagnosis{URL: rawURL}
	if p.routesOf(sandboxID) == nil {
		return d, ErrNotProxied
	}
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Host == "" {
		return d, &InputError{Field: "url", Err: fmt.Errorf("url must be absolute, like https://example.com/path")}
	}
	var port uint16
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		port = 80
	case "https", "wss":
		port = 443
	default:
		return d, &InputError{Field: "url", Err: fmt.Errorf("url scheme %q is not routed by the proxy (http, https, ws, wss)", sanitize(u.Scheme))}
	}
	if ps := u.Port(); ps != "" {
		if port, err = parsePort(ps); err != nil {
			return d, &InputError{Field: "url", Err: fmt.Errorf("url port: %w", err)}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	pl, ref := p.plan(ctx, sandboxID, u.Hostname(), port)
	d.Mapping, d.Via = pl.mapping, pl.viaAddr()
	d.Target = hostPort(hostOr(pl.t.host, u.Hostname()), pl.t.port, 0)
	ev := Event{Sandbox: sandboxID, Host: hostOr(pl.t.host, u.Hostname()), Port: int(pl.t.port), Via: d.Via, MappedFrom: pl.mappedFrom(), Time: p.opts.Now()}
	if ref != nil && ref.verdict() == VerdictDenied {
		d.Route, d.Reason = RouteDenied, ref.client
		ev.Verdict, ev.Reason = VerdictDenied, "diagnose: "+ref.audit
		p.opts.OnEvent(ev)
		return d, nil
	}
	d.Route = pl.route
	ev.Verdict, ev.Route = VerdictAllowed, pl.route
	if ref != nil { // allowed, but the name did not resolve
		d.Reason = ref.client
		ev.Reason = "diagnose: " + ref.audit
		p.opts.OnEvent(ev)
		return d, nil
	}
	c, ref := p.open(ctx, sandboxID, &pl, newActivity(), false)
	if ref != nil {
		d.Reason = ref.client
		ev.Reason = "diagnose: " + ref.audit
		p.opts.OnEvent(ev)
		return d, nil
	}
	_ = c.Close()
	d.Reachable = true
	ev.Reason = "diagnose: connected"
	ev.Time = c.start
	p.opts.OnEvent(ev)
	return d, nil
}

// Health is the state of a sandbox's egress proxy and routing.
type Health struct {
	// Serving: the proxy holds the sandbox's policy and serves its
	// connections.
	Serving     bool
	ActiveConns int
	// Upstream is the upstream without its password ("" when none).
	Upstream string
	// UpstreamReachable is the result of a TCP connect to the upstream
	// (nil when there is none); UpstreamError says why it failed.
	UpstreamReachable *bool
	UpstreamError     string
	// Inconsistencies are routing entries the current allow list no longer
	// permits (the allow list can change after they were set) and a saved
	// routing that could not be restored.
	Inconsistencies []string
}

// Healthy: serving, consistent, and the upstream (if any) reachable.
func (h Health) Healthy() bool {
	return h.Serving && len(h.Inconsistencies) == 0 && (h.UpstreamReachable == nil || *h.UpstreamReachable)
}

// Health reports the sandbox's proxy and routing, connecting to the
// upstream (if any) with ProbeTimeout.
func (p *Proxy) Health(ctx context.Context, sandboxID string) (Health, error) {
	p.mu.Lock()
	st := p.sandboxes[sandboxID]
	var (
		rt *routes
		a  *Allowlist
		n  int
	)
	if st != nil {
		rt, a, n = st.routes, st.allow, len(st.conns)
	}
	p.mu.Unlock()
	if st == nil {
		return Health{}, ErrNotProxied
	}
	h := Health{Serving: a != nil, ActiveConns: n, Inconsistencies: []string{}}
	if rt.broken != "" {
		h.Inconsistencies = append(h.Inconsistencies, "the saved routing could not be restored; connections are refused until it is set again")
	}
	for _, m := range rt.r.Mappings {
		switch {
		case m.Loopback() && p.opts.DialSandbox == nil:
			h.Inconsistencies = append(h.Inconsistencies, fmt.Sprintf("mapping %q targets the sandbox's loopback, which this server does not reach", m.Source))
		case !m.Loopback() && !a.permits(m.TargetHost, m.TargetPort):
			h.Inconsistencies = append(h.Inconsistencies, fmt.Sprintf("mapping %q: target %s is not in the allow list", m.Source, m.TargetAddr()))
		}
	}
	up := rt.r.Upstream
	if up == nil {
		return h, nil
	}
	h.Upstream = up.String()
	if !a.permits(up.Host, up.Port) {
		h.Inconsistencies = append(h.Inconsistencies, fmt.Sprintf("upstream %s is not in the allow list", up.Addr()))
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	ok := false
	ev := Event{Sandbox: sandboxID, Host: up.Host, Port: int(up.Port), Verdict: VerdictAllowed, Time: p.opts.Now()}
	if ut, ref := p.check(ctx, a, up.Host, up.Port); ref != nil {
		h.UpstreamError = ref.client
		ev.Verdict, ev.Reason = ref.verdict(), "health: upstream: "+ref.audit
	} else if c, ref := p.dial(ctx, ut, newActivity()); ref != nil {
		h.UpstreamError = ref.client
		ev.Reason = "health: upstream: " + ref.audit
	} else {
		_ = c.Close()
		ok = true
		ev.Reason, ev.Time = "health: upstream connected", c.start
	}
	if ev.Verdict == VerdictAllowed {
		ev.Route = RouteDirect
	}
	p.opts.OnEvent(ev)
	h.UpstreamReachable = &ok
	return h, nil
}

// permits says whether the allow list lists host:port, by name or by
// address, without resolving it (Health's consistency check; connections
// resolve and check every address).
func (a *Allowlist) permits(host string, port uint16) bool {
	if a == nil {
		return false
	}
	name, addr, err := canonicalHost(host)
	if err != nil {
		return false
	}
	if addr.IsValid() {
		return a.coveringIP(addr, port) != nil
	}
	r, _ := a.matchName(name, port)
	return r != nil
}
