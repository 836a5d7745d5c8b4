package egress

// The route of one connection: its mapping, the allow-list checks of its
// destination and of its upstream, and the opening of the connection —
// direct, through the upstream (HTTP CONNECT or SOCKS5), or into the
// sandbox's own loopback.

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/proxy"
)

// plan is a decided route.
type plan struct {
	// asked is the destination as the client named it, canonical.
	asked target
	// t is the checked destination (after mapping); for RouteSandbox it
	// is 127.0.0.1 and the mapped port.
	t     target
	route string
	// mapping is the mapping applied, if any.
	mapping *Mapping
	// via is the upstream and upT its checked address (RouteUpstream).
	via *Upstream
	upT target
}

// viaAddr is the upstream's host:port for events ("" when direct).
func (pl *plan) viaAddr() string {
	if pl.via == nil {
		return ""
	}
	return pl.via.Addr()
}

func (pl *plan) mappedFrom() string {
	if pl.mapping == nil {
		return ""
	}
	return hostPort(pl.asked.host, pl.asked.port, 0)
}

// plan decides how sandboxID reaches rawHost:port: the mapping, the allow
// list on the destination, and the upstream (itself checked) unless the
// destination is excluded. asked carries the canonical destination even
// on refusal when the host could be read.
func (p *Proxy) plan(ctx context.Context, sandboxID, rawHost string, port uint16) (plan, *refusal) {
	a := p.allowlist(sandboxID)
	name, addr, err := canonicalHost(rawHost)
	if err != nil {
		t, ref := p.check(ctx, a, rawHost, port)
		return plan{asked: t, t: t}, ref
	}
	asked := target{host: name, port: port}
	if addr.IsValid() {
		asked.host = addr.String()
	}
	pl := plan{asked: asked, t: asked, route: RouteDirect}
	rt := p.routesOf(sandboxID)
	if rt == nil || a == nil {
		_, ref := p.check(ctx, a, rawHost, port)
		return pl, ref
	}
	if rt.broken != "" {
		return pl, &refusal{http.StatusServiceUnavailable, "this sandbox's proxy routing could not be restored after a restart; set its upstream, mappings and excludes again", "routing state unreadable: " + rt.broken}
	}
	if m := rt.mapping(asked.host, port); m != nil {
		mc := *m
		pl.mapping = &mc
		if m.Loopback() {
			if p.opts.DialSandbox == nil {
				return pl, &refusal{http.StatusForbidden, fmt.Sprintf("%s is mapped into the sandbox, which this server does not reach", quoteHost(hostPort(asked.host, port, 0))), "mapping to the sandbox's loopback without DialSandbox"}
			}
			pl.route = RouteSandbox
			pl.t = target{host: "127.0.0.1", port: m.TargetPort}
			return pl, nil
		}
		rawHost, port = m.TargetHost, m.TargetPort
	}
	t, ref := p.check(ctx, a, rawHost, port)
	pl.t = t
	if ref != nil {
		if pl.mapping != nil {
			ref.client = fmt.Sprintf("mapped from %s: %s", quoteHost(pl.mappedFrom()), ref.client)
		}
		return pl, ref
	}
	if up := rt.r.Upstream; up != nil && !rt.excluded(t) {
		ut, ref := p.check(ctx, a, up.Host, up.Port)
		if ref != nil {
			ref.client = "upstream proxy " + quoteHost(up.Addr()) + ": " + ref.client
			ref.audit = "upstream " + up.Addr() + ": " + ref.audit
			if ref.status == http.StatusForbidden {
				// The destination was allowed, the upstream is not: the
				// request is refused, not relayed some other way.
				ref.audit = "upstream not allowed: " + ref.audit
			}
			return pl, ref
		}
		u := *up
		pl.via, pl.upT, pl.route = &u, ut, RouteUpstream
	}
	return pl, nil
}

// open connects along a plan. forward is set for a plain-HTTP request
// through an HTTP upstream: the connection is to the upstream itself and
// the request goes in absolute form (forwardAuth adds the credentials);
// otherwise the connection carries the destination's bytes.
func (p *Proxy) open(ctx context.Context, sandboxID string, pl *plan, act *activity, forward bool) (*countConn, *refusal) {
	switch pl.route {
	case RouteSandbox:
		dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
		defer cancel()
		c, err := p.opts.DialSandbox(dctx, sandboxID, pl.t.port)
		if err != nil {
			return nil, &refusal{http.StatusBadGateway, fmt.Sprintf("could not connect to port %d in the sandbox (mapped from %s)", pl.t.port, quoteHost(pl.mappedFrom())), "dial into the sandbox: " + err.Error()}
		}
		return &countConn{Conn: &idleConn{Conn: c, idle: p.opts.IdleTimeout, act: act}, start: p.opts.Now()}, nil
	case RouteUpstream:
		c, ref := p.dial(ctx, pl.upT, act)
		if ref != nil {
			ref.client = "upstream proxy " + quoteHost(pl.via.Addr()) + ": " + ref.client
			ref.audit = "upstream " + pl.via.Addr() + ": " + ref.audit
			return nil, ref
		}
		if forward && pl.via.Scheme == SchemeHTTP {
			return c, nil
		}
		if ref := p.handshake(ctx, c, pl.via, hostPort(pl.t.host, pl.t.port, 0)); ref != nil {
			_ = c.Close()
			return nil, ref
		}
		// The event counts the destination's bytes, not the handshake's.
		c.up.Store(0)
		c.down.Store(0)
		return c, nil
	}
	return p.dial(ctx, pl.t, act)
}

// handshake asks the upstream, over c, for a tunnel to dest (host:port);
// the name is sent, not an address: the upstream resolves it.
func (p *Proxy) handshake(ctx context.Context, c *countConn, up *Upstream, dest string) *refusal {
	ic, _ := c.Conn.(*idleConn)
	deadline := time.Now().Add(p.opts.DialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if ic != nil {
		ic.until = deadline
		defer func() { ic.until = time.Time{} }()
	}
	_ = c.SetWriteDeadline(deadline)
	defer func() { _ = c.SetWriteDeadline(time.Time{}) }()
	fail := func(client, audit string) *refusal {
		return &refusal{http.StatusBadGateway, "upstream proxy " + quoteHost(up.Addr()) + ": " + client, "upstream " + up.Addr() + ": " + audit}
	}
	switch up.Scheme {
	case SchemeSOCKS5:
		var auth *proxy.Auth
		if up.Username != "" {
			auth = &proxy.Auth{User: up.Username, Password: up.Password}
		}
		d, err := proxy.SOCKS5("tcp", up.Addr(), auth, preDialed{c})
		if err != nil {
			return fail("SOCKS5 set-up failed", err.Error())
		}
		cd, ok := d.(proxy.ContextDialer)
		if !ok {
			return fail("SOCKS5 set-up failed", "dialer without context")
		}
		hctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		if _, err := cd.DialContext(hctx, "tcp", dest); err != nil {
			// The error names the upstream's answer (refused, auth
			// failed); it carries no credential.
			return fail("SOCKS5 connect to "+quoteHost(dest)+" failed", "socks5: "+err.Error())
		}
		return nil
	default:
		req := "CONNECT " + dest + " HTTP/1.1\r\nHost: " + dest + "\r\n"
		if h := proxyAuthorization(up); h != "" {
			req += "Proxy-Authorization: " + h + "\r\n"
		}
		req += "\r\n"
		if _, err := io.WriteString(c, req); err != nil {
			return fail("could not send CONNECT", "write CONNECT: "+err.Error())
		}
		br := bufio.NewReaderSize(c, p.opts.MaxHeaderBytes)
		if _, err := peekHead(br, p.opts.MaxHeaderBytes); err != nil {
			return fail("no answer to CONNECT", "read CONNECT answer: "+err.Error())
		}
		// The answer's body, if any, is the tunnel itself: it is neither
		// read nor closed here (closing could read from the tunnel).
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}) //nolint:bodyclose // see above: the body is the tunnel
		if err != nil {
			return fail("malformed answer to CONNECT", "read CONNECT answer: "+err.Error())
		}
		if resp.StatusCode != http.StatusOK {
			why := "refused CONNECT to " + quoteHost(dest) + " with " + strconv.Itoa(resp.StatusCode)
			if resp.StatusCode == http.StatusProxyAuthRequired {
				why += " (the upstream wants other credentials)"
			}
			return fail(why, "CONNECT answered "+strconv.Itoa(resp.StatusCode))
		}
		if br.Buffered() > 0 {
			// Bytes the destination sent right after the tunnel opened.
			c.Conn = &bufferedConn{Conn: c.Conn, r: br}
		}
		return nil
	}
}

// proxyAuthorization is the Basic credential for an HTTP upstream ("" when
// it has none).
func proxyAuthorization(up *Upstream) string {
	if up == nil || up.Username == "" {
		return ""
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(up.Username+":"+up.Password))
}

// preDialed hands the SOCKS5 client the connection already opened to the
// checked upstream address.
type preDialed struct{ c net.Conn }

func (d preDialed) Dial(string, string) (net.Conn, error) { return d.c, nil }
func (d preDialed) DialContext(context.Context, string, string) (net.Conn, error) {
	return d.c, nil
}

// bufferedConn reads first what a bufio.Reader holds.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the underlying connection when it can.
func (c *bufferedConn) CloseWrite() error {
	closeWrite(c.Conn)
	return nil
}
