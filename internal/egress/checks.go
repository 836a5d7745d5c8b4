package egress

// The checks every request and tunnel passes before a byte goes out: the
// allowlist against the name and every address it resolves to, the dial of
// the checked address, the Host headers, and the sanitising of what is
// logged.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// target is a checked destination.
type target struct {
	host  string // canonical name or address text
	port  uint16
	addrs []netip.Addr
}

// refusal is a denied or failed request.
type refusal struct {
	status int
	client string // plain text for the client: no internal detail
	audit  string // for the event
}

// verdict is the event verdict: a 502 is a target the policy allowed that
// could not be resolved or reached; everything else was refused.
func (r *refusal) verdict() string {
	if r.status == http.StatusBadGateway {
		return VerdictAllowed
	}
	return VerdictDenied
}

// check decides whether the sandbox may reach rawHost:port and returns the
// addresses to dial. It resolves names itself and checks every address.
func (p *Proxy) check(ctx context.Context, a *Allowlist, rawHost string, port uint16) (target, *refusal) {
	name, addr, err := canonicalHost(rawHost)
	if err != nil {
		return target{}, &refusal{http.StatusBadRequest, fmt.Sprintf("invalid host %q: %v", sanitize(rawHost), err), "invalid host: " + err.Error()}
	}
	t := target{host: name, port: port}
	if addr.IsValid() {
		t.host = addr.String()
	}
	hp := hostPort(t.host, port, 0)
	if a == nil {
		return t, &refusal{http.StatusForbidden, fmt.Sprintf("%s denied: this sandbox has no egress allowlist", quoteHost(hp)), "no policy"}
	}

	if addr.IsValid() {
		if neverDialable(addr) {
			return t, &refusal{http.StatusForbidden, fmt.Sprintf("%s denied: unspecified, multicast and reserved addresses are never reachable", quoteHost(hp)), "never-dialable address"}
		}
		if r := a.coveringIP(addr, port); r == nil {
			return t, &refusal{http.StatusForbidden, fmt.Sprintf("%s denied: IP addresses are reachable only when listed explicitly in the allowlist", quoteHost(hp)), "IP literal not listed"}
		}
		t.addrs = []netip.Addr{addr}
		return t, nil
	}

	r, portMiss := a.matchName(name, port)
	if r == nil {
		if portMiss != nil {
			return t, &refusal{http.StatusForbidden, fmt.Sprintf("%s denied: allowlist entry %q permits %s only", quoteHost(hp), portMiss.entry, portMiss.portText()), "port not listed for " + portMiss.entry}
		}
		return t, &refusal{http.StatusForbidden, fmt.Sprintf("%s denied: not in this sandbox's egress allowlist", quoteHost(hp)), "host not listed"}
	}

	var addrs []netip.Addr
	if r.localhost {
		// RFC 6761: localhost names are the loopback, never asked of DNS.
		addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}
	} else {
		rctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
		ips, err := p.opts.Resolver.LookupIPAddr(rctx, name)
		cancel()
		if err != nil || len(ips) == 0 {
			return t, &refusal{http.StatusBadGateway, fmt.Sprintf("could not resolve %q", name), "resolve failed"}
		}
		if len(ips) > maxResolvedAddrs {
			return t, &refusal{http.StatusForbidden, fmt.Sprintf("%s denied: the name resolves to too many addresses", quoteHost(hp)), "too many addresses"}
		}
		for _, ip := range ips {
			a, ok := netip.AddrFromSlice(ip.IP)
			if !ok {
				return t, &refusal{http.StatusBadGateway, fmt.Sprintf("could not resolve %q", name), "resolver returned a malformed address"}
			}
			addrs = append(addrs, a.Unmap())
		}
	}
	for _, ip := range addrs {
		if neverDialable(ip) {
			return t, &refusal{http.StatusForbidden, fmt.Sprintf("%s denied: the name resolves to an address that is never reachable", quoteHost(hp)), "resolves to never-dialable " + ip.String()}
		}
		why := deniedReason(ip)
		if why == "" {
			continue
		}
		if r.localhost && ip.IsLoopback() {
			continue // allowed because a localhost entry is listed
		}
		if a.coveringIP(ip, port) != nil {
			continue // allowed because the address is listed explicitly
		}
		return t, &refusal{http.StatusForbidden,
			fmt.Sprintf("%s denied: the name resolves to %s, which is reachable only when listed explicitly as an address", quoteHost(hp), why),
			fmt.Sprintf("resolves to %s (%s) not listed; matched entry %q", ip, why, r.entry)}
	}
	t.addrs = addrs
	return t, nil
}

// matchName returns the first rule matching name and port; when a rule
// matches the name but not the port, it is returned as portMiss.
func (a *Allowlist) matchName(name string, port uint16) (match, portMiss *rule) {
	for i := range a.rules {
		r := &a.rules[i]
		if !r.matchName(name) {
			continue
		}
		if r.portOK(port) {
			return r, nil
		}
		if portMiss == nil {
			portMiss = r
		}
	}
	return nil, portMiss
}

// coveringIP returns the first address rule covering ip at port.
func (a *Allowlist) coveringIP(ip netip.Addr, port uint16) *rule {
	for i := range a.rules {
		r := &a.rules[i]
		if r.isIP() && r.prefix.Contains(ip) && r.portOK(port) {
			return r
		}
	}
	return nil
}

func (r *rule) portText() string {
	if r.port != 0 {
		return "port " + strconv.Itoa(int(r.port))
	}
	return "ports 80 and 443"
}

// dial connects to the first reachable checked address. The name is never
// passed to the dialer, so what was checked is what is dialed.
func (p *Proxy) dial(ctx context.Context, t target, act *activity) (*countConn, *refusal) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	var last error
	for i, ip := range t.addrs {
		if i >= maxDialAttempts {
			break
		}
		c, err := p.opts.Dial(ctx, "tcp", netip.AddrPortFrom(ip, t.port).String())
		if err == nil {
			return &countConn{Conn: &idleConn{Conn: c, idle: p.opts.IdleTimeout, act: act}, start: p.opts.Now()}, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	reason := "dial failed"
	if last != nil {
		reason = "dial failed: " + last.Error()
	}
	return nil, &refusal{http.StatusBadGateway, fmt.Sprintf("could not connect to %s", quoteHost(hostPort(t.host, t.port, 0))), reason}
}

// checkHostHeaders refuses a request whose Host header names something
// other than its target. defaultPort is the port a Host without one means
// (0: any, as for CONNECT).
func checkHostHeaders(values []string, t target, defaultPort uint16) *refusal {
	if len(values) == 0 {
		return nil
	}
	if len(values) > 1 {
		return &refusal{http.StatusBadRequest, "malformed request: more than one Host header", "several Host headers"}
	}
	v := values[0]
	host, port := v, defaultPort
	if h, ps, err := net.SplitHostPort(v); err == nil {
		p, err := parsePort(ps)
		if err != nil {
			return &refusal{http.StatusBadRequest, "malformed request: bad Host header", "bad Host header"}
		}
		host, port = h, p
	} else if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
		host = v[1 : len(v)-1]
	}
	name, addr, err := canonicalHost(host)
	if err == nil && addr.IsValid() {
		name = addr.String()
	}
	if err != nil || name != t.host || (port != 0 && port != t.port) {
		return &refusal{http.StatusForbidden,
			fmt.Sprintf("Host header %q does not match the request target %s", sanitize(v), quoteHost(hostPort(t.host, t.port, 0))),
			"Host header " + strconv.Quote(sanitize(v)) + " disagrees with the target"}
	}
	return nil
}

// peekHead returns the request head (request line and headers, up to and
// including the blank line) without consuming it.
func peekHead(br *bufio.Reader, maxBytes int) ([]byte, error) {
	scanned := 0
	for {
		// Wait for at least one byte beyond what was searched, then search
		// everything buffered.
		_, err := br.Peek(scanned + 1)
		b, _ := br.Peek(br.Buffered())
		start := max(scanned-3, 0)
		if i := bytes.Index(b[start:], []byte("\n\r\n")); i >= 0 {
			return b[:start+i+3], nil
		}
		if i := bytes.Index(b[start:], []byte("\n\n")); i >= 0 {
			return b[:start+i+2], nil
		}
		if errors.Is(err, bufio.ErrBufferFull) || len(b) >= maxBytes {
			return nil, errHeaderTooLarge
		}
		if err != nil {
			return nil, err
		}
		scanned = len(b)
	}
}

// rawHostHeaders returns the values of every Host header line in head
// (net/http drops them for absolute-form requests).
func rawHostHeaders(head []byte) ([]string, error) {
	var out []string
	lines := bytes.Split(head, []byte("\n"))
	for _, l := range lines[1:] {
		l = bytes.TrimSuffix(l, []byte("\r"))
		if len(l) == 0 {
			break
		}
		if l[0] == ' ' || l[0] == '\t' {
			return nil, errors.New("folded header lines are not accepted")
		}
		name, val, ok := bytes.Cut(l, []byte(":"))
		if ok && strings.EqualFold(string(bytes.TrimRight(name, " \t")), "Host") {
			if !bytes.Equal(name, bytes.TrimRight(name, " \t")) {
				return nil, errors.New("space before colon in Host header")
			}
			out = append(out, string(bytes.Trim(val, " \t")))
		}
	}
	return out, nil
}

func firstErr(what string, errs ...error) string {
	for _, e := range errs {
		if e != nil {
			return what + ": " + e.Error()
		}
	}
	return ""
}

// hostPort formats host and port, leaving out defaultPort.
func hostPort(host string, port, defaultPort uint16) string {
	if port == defaultPort {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

func quoteHost(hp string) string { return strconv.Quote(hp) }

func hostOr(canonical, raw string) string {
	if canonical != "" {
		return canonical
	}
	return sanitize(raw)
}

// sanitize makes client-supplied text safe for messages and audit records:
// bounded, printable.
func sanitize(s string) string {
	const maxLen = 256 // a host name is at most 253 octets
	if len(s) > maxLen {
		s = s[:maxLen]
	}
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
}
