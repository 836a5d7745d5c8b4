// Package egress is the host-side HTTP and CONNECT proxy through which a
// sandbox in network mode "proxy" reaches the outside, and the allowlist it
// enforces. It stops a sandboxed program from reaching anything its
// operator did not list: the host's own services on loopback, the private
// network, the cloud metadata service (169.254.169.254, fd00:ec2::254),
// addresses smuggled as obfuscated literals (2130706433, 0177.0.0.1,
// ::ffff:127.0.0.1), names that rebind to internal addresses between check
// and use, and look-alike names (allowed.example.evil.test).
//
// How: the in-sandbox init accepts connections on 127.0.0.1:3128 inside the
// sandbox's network namespace and hands each socket to the server, which
// calls ServeConn with the sandbox's id. The proxy parses the request,
// canonicalises the target host (IDNA, case, trailing dot, numeric forms),
// matches it against the sandbox's allowlist, resolves names itself, checks
// EVERY resolved address, and dials the checked address — never the name —
// so no second resolution can change the answer. Responses are relayed as
// they are: the proxy never follows redirects; the client's follow-up
// request is checked like any other.
//
// What it does not do: it does not look inside TLS (CONNECT tunnels carry
// whatever the client sends once the target is allowed), and it does not
// limit bandwidth.
package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Verdicts in Event.Verdict.
const (
	VerdictAllowed = "allowed"
	VerdictDenied  = "denied"
)

// Event describes one connection attempt: one CONNECT, one upstream
// connection for plain HTTP (several keep-alive requests to the same host
// share it), or one refused request. Allowed events are sent when the
// upstream connection ends, with its byte counts.
type Event struct {
	Sandbox string
	// Host is the canonical target host (IDNA ASCII name or address).
	Host string
	Port int
	// Verdict is VerdictAllowed or VerdictDenied.
	Verdict string
	// Reason is for the operator (audit): why it was denied, or what went
	// wrong on an allowed connection. It may name resolved addresses.
	Reason string
	// BytesUp counts bytes sent to the upstream, BytesDown bytes received
	// from it (HTTP headers included for plain HTTP, tunnel payload only for
	// CONNECT).
	BytesUp, BytesDown int64
	// Time is when the attempt was decided: the refusal, or the opening of
	// the upstream connection (the event itself is sent when it ends).
	Time time.Time
}

// Resolver resolves host names; *net.Resolver satisfies it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Defaults and caps.
const (
	DefaultDialTimeout    = 10 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultMaxHeaderBytes = 32 << 10
	// DefaultMaxConnsPerSandbox caps concurrent client connections of one
	// sandbox. Reason: each costs two sockets, two goroutines and buffers on
	// the host; a sandbox opening connections in a loop must not exhaust the
	// host's file descriptors.
	DefaultMaxConnsPerSandbox = 64
	// maxResolvedAddrs bounds the addresses checked for one name; a name
	// with more is refused rather than partially checked.
	maxResolvedAddrs = 64
	// maxDialAttempts bounds how many checked addresses are tried in turn.
	maxDialAttempts = 4
	// copyBufSize is the fixed buffer of each tunnel direction.
	copyBufSize = 32 << 10
	// headerTimeout bounds the time to send one request head, so a client
	// trickling a byte at a time cannot hold a connection slot forever.
	headerTimeout = 30 * time.Second
	// maxRequestsPerConn bounds keep-alive requests on one client
	// connection (a loop guard; clients reconnect transparently).
	maxRequestsPerConn = 10_000
)

// Options configures a Proxy. Zero values mean the defaults above, the
// system resolver, a plain net.Dialer and the wall clock.
type Options struct {
	Resolver Resolver
	// Dial opens the upstream connection; addr is always "ip:port".
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnEvent receives one Event per connection attempt. It is called on the
	// connection's goroutine and must not block for long.
	OnEvent func(Event)
	// DialTimeout bounds the name resolution and, separately, the dial.
	DialTimeout time.Duration
	// IdleTimeout ends a connection with no byte moved in either direction
	// for this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request head and an upstream response head.
	MaxHeaderBytes int
	// MaxConnsPerSandbox caps concurrent client connections per sandbox;
	// one more gets 429.
	MaxConnsPerSandbox int
	// Now stamps events.
	Now func() time.Time
}

// Proxy enforces per-sandbox allowlists. Safe for concurrent use.
type Proxy struct {
	opts Options

	mu sync.Mutex
	// sandboxes holds the policy and live client connections per sandbox.
	sandboxes map[string]*sandboxState
}

type sandboxState struct {
	allow *Allowlist
	// conns are the live client connections, closed by Remove.
	conns map[net.Conn]struct{}
}

// New returns a Proxy with no policies: every sandbox is denied until
// SetPolicy is called for it.
func New(opts Options) *Proxy {
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.Dial == nil {
		opts.Dial = (&net.Dialer{}).DialContext
	}
	if opts.OnEvent == nil {
		opts.OnEvent = func(Event) {}
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.MaxConnsPerSandbox <= 0 {
		opts.MaxConnsPerSandbox = DefaultMaxConnsPerSandbox
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Proxy{opts: opts, sandboxes: make(map[string]*sandboxState)}
}

// SetPolicy installs or replaces a sandbox's allowlist. It applies to every
// request checked afterwards (new connections and the next request on a
// keep-alive connection); established CONNECT tunnels are not cut. On
// error the previous policy stays in force.
func (p *Proxy) SetPolicy(sandboxID string, pol Policy) error {
	a, err := ParsePolicy(pol)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.sandboxes[sandboxID]
	if st == nil {
		st = &sandboxState{conns: make(map[net.Conn]struct{})}
		p.sandboxes[sandboxID] = st
	}
	st.allow = a
	return nil
}

// Remove forgets a sandbox's policy and closes its live connections.
func (p *Proxy) Remove(sandboxID string) {
	p.mu.Lock()
	var conns []net.Conn
	if st := p.sandboxes[sandboxID]; st != nil {
		for c := range st.conns {
			conns = append(conns, c)
		}
	}
	delete(p.sandboxes, sandboxID)
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close() // ends the connection's ServeConn; nothing to report
	}
}

// ActiveConns returns the number of live client connections of a sandbox.
func (p *Proxy) ActiveConns(sandboxID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.sandboxes[sandboxID]; st != nil {
		return len(st.conns)
	}
	return 0
}

func (p *Proxy) allowlist(sandboxID string) *Allowlist {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.sandboxes[sandboxID]; st != nil {
		return st.allow
	}
	return nil
}

// register counts c against the sandbox's connection cap.
func (p *Proxy) register(sandboxID string, c net.Conn) (ok bool, unregister func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.sandboxes[sandboxID]
	if st == nil {
		// No policy: the connection is served only to be refused.
		return true, func() {}
	}
	if len(st.conns) >= p.opts.MaxConnsPerSandbox {
		return false, func() {}
	}
	st.conns[c] = struct{}{}
	return true, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(st.conns, c)
	}
}

// ServeConn handles one client connection from sandboxID until it ends:
// plain HTTP proxy requests (absolute-form http:// URLs, keep-alive) and
// CONNECT tunnels. It closes c before returning, and returns early when ctx
// ends.
func (p *Proxy) ServeConn(ctx context.Context, sandboxID string, c net.Conn) {
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()

	act := newActivity()
	s := &session{
		p:       p,
		ctx:     ctx,
		sandbox: sandboxID,
		act:     act,
		client:  &idleConn{Conn: c, idle: p.opts.IdleTimeout, act: act},
	}
	s.br = bufio.NewReaderSize(s.client, p.opts.MaxHeaderBytes)
	defer s.closeUpstream("")

	ok, unregister := p.register(sandboxID, c)
	defer unregister()
	if !ok {
		s.event("", 0, VerdictDenied, "too many concurrent proxy connections for this sandbox", nil)
		s.refuse(http.StatusTooManyRequests, fmt.Sprintf("too many concurrent proxy connections for this sandbox (limit %d)", p.opts.MaxConnsPerSandbox))
		return
	}
	for range maxRequestsPerConn {
		if !s.serveOne() {
			return
		}
	}
}

// session is the state of one client connection.
type session struct {
	p       *Proxy
	ctx     context.Context
	sandbox string
	act     *activity
	client  *idleConn
	br      *bufio.Reader
	// up is the current upstream connection for plain HTTP, reused while
	// requests go to the same host and port.
	up *upstream
}

type upstream struct {
	key      string // canonical "host:port"
	host     string
	port     uint16
	conn     *countConn
	br       *bufio.Reader
	reusable bool
}

var (
	errHeaderTooLarge = errors.New("message head too large")
)

// serveOne reads and handles one request; it reports whether the
// connection may carry another.
func (s *session) serveOne() bool {
	s.client.until = time.Now().Add(headerTimeout)
	head, err := peekHead(s.br, s.p.opts.MaxHeaderBytes)
	if err != nil {
		switch {
		case isTimeout(err) && s.br.Buffered() > 0:
			s.event("", 0, VerdictDenied, "request head not completed in time", nil)
			s.refuse(http.StatusRequestTimeout, "request head not completed in time")
		case errors.Is(err, errHeaderTooLarge):
			s.event("", 0, VerdictDenied, "request header too large", nil)
			s.refuse(http.StatusRequestHeaderFieldsTooLarge, "request header too large")
		case s.br.Buffered() > 0:
			s.event("", 0, VerdictDenied, "incomplete request", nil)
			s.refuse(http.StatusBadRequest, "malformed request")
		}
		return false // EOF, idle timeout or closed between requests: quietly
	}
	hostHeaders, err := rawHostHeaders(head)
	if err != nil {
		s.event("", 0, VerdictDenied, "malformed request: "+err.Error(), nil)
		s.refuse(http.StatusBadRequest, "malformed request: "+err.Error())
		return false
	}
	req, err := http.ReadRequest(s.br)
	s.client.until = time.Time{} // the head is in the buffer; bodies have no total deadline
	if err != nil {
		s.event("", 0, VerdictDenied, "malformed request", nil)
		s.refuse(http.StatusBadRequest, "malformed request")
		return false
	}
	if req.Method == http.MethodConnect {
		s.serveConnect(req, hostHeaders)
		return false
	}
	return s.serveHTTP(req, hostHeaders)
}

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

func (s *session) serveConnect(req *http.Request, hostHeaders []string) {
	authority := req.RequestURI
	if req.URL == nil || req.URL.Host == "" || strings.HasPrefix(authority, "/") || req.URL.User != nil || strings.Contains(authority, "@") {
		s.event(sanitize(authority), 0, VerdictDenied, "malformed CONNECT target", nil)
		s.refuse(http.StatusBadRequest, "malformed CONNECT target: expected host:port")
		return
	}
	rawHost, rawPort, err := net.SplitHostPort(req.URL.Host)
	if err != nil {
		s.event(sanitize(authority), 0, VerdictDenied, "malformed CONNECT target", nil)
		s.refuse(http.StatusBadRequest, "malformed CONNECT target: expected host:port")
		return
	}
	port, err := parsePort(rawPort)
	if err != nil {
		s.event(sanitize(rawHost), 0, VerdictDenied, "malformed CONNECT port", nil)
		s.refuse(http.StatusBadRequest, "malformed CONNECT target: bad port")
		return
	}
	t, ref := s.p.check(s.ctx, s.p.allowlist(s.sandbox), rawHost, port)
	if ref == nil {
		ref = checkHostHeaders(hostHeaders, t, 0)
	}
	if ref != nil {
		s.event(hostOr(t.host, rawHost), port, ref.verdict(), ref.audit, nil)
		s.refuse(ref.status, ref.client)
		return
	}
	conn, ref := s.p.dial(s.ctx, t, s.act)
	if ref != nil {
		s.event(t.host, port, VerdictAllowed, ref.audit, nil)
		s.refuse(ref.status, ref.client)
		return
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(s.client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		s.event(t.host, port, VerdictAllowed, "client went away", conn)
		return
	}
	reason := tunnel(s.client, s.br, conn)
	s.event(t.host, port, VerdictAllowed, reason, conn)
}

// tunnel copies both ways until both directions end, with fixed buffers;
// clientR is the client's buffered reader (it may hold bytes sent right
// after the CONNECT head).
func tunnel(client *idleConn, clientR io.Reader, up *countConn) string {
	errc := make(chan error, 2)
	go func() {
		err := copyFixed(up, clientR)
		closeWrite(up)
		errc <- err
	}()
	go func() {
		err := copyFixed(client, up)
		closeWrite(client)
		errc <- err
	}()
	var first error
	for range 2 {
		if err := <-errc; err != nil && first == nil {
			first = err
			// One side failed (not a clean EOF): end the other direction.
			_ = client.Close()
			_ = up.Close()
		}
	}
	if first != nil {
		return "tunnel ended: " + first.Error()
	}
	return ""
}

func copyFixed(dst io.Writer, src io.Reader) error {
	buf := make([]byte, copyBufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func closeWrite(c net.Conn) {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.(closeWriter); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// serveHTTP relays one absolute-form http:// request.
func (s *session) serveHTTP(req *http.Request, hostHeaders []string) bool {
	defer func() { _ = req.Body.Close() }()
	u := req.URL
	if u == nil || !u.IsAbs() || u.Host == "" {
		s.event("", 0, VerdictDenied, "not a proxy request (origin-form URL)", nil)
		s.refuse(http.StatusBadRequest, "this is an HTTP proxy: send absolute http:// URLs, or CONNECT host:port")
		return false
	}
	if !strings.EqualFold(u.Scheme, "http") {
		s.event(sanitize(u.Hostname()), 0, VerdictDenied, "unsupported scheme "+sanitize(u.Scheme), nil)
		s.refuse(http.StatusBadRequest, fmt.Sprintf("scheme %q is not supported by the proxy; use CONNECT for https", sanitize(u.Scheme)))
		return false
	}
	port := uint16(80)
	if ps := u.Port(); ps != "" {
		p, err := parsePort(ps)
		if err != nil {
			s.event(sanitize(u.Hostname()), 0, VerdictDenied, "bad port", nil)
			s.refuse(http.StatusBadRequest, "malformed request: bad port")
			return false
		}
		port = p
	}
	t, ref := s.p.check(s.ctx, s.p.allowlist(s.sandbox), u.Hostname(), port)
	if ref == nil {
		ref = checkHostHeaders(hostHeaders, t, 80)
	}
	if ref != nil {
		s.event(hostOr(t.host, u.Hostname()), port, ref.verdict(), ref.audit, nil)
		s.refuse(ref.status, ref.client)
		return false
	}

	// The outgoing request: origin-form, Host from the checked target,
	// no credentials for the proxy, no hop-by-hop headers.
	out := req
	out.URL.User = nil
	out.URL.Scheme, out.URL.Host = "http", hostPort(t.host, port, 80)
	out.Host = out.URL.Host
	out.RequestURI = ""
	removeHopByHop(out.Header)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // keep Go from adding its own
	}
	clientClose := req.Close

	key := net.JoinHostPort(t.host, strconv.Itoa(int(port)))
	var (
		up       *upstream
		resp     *http.Response
		writeErr chan error
	)
	for attempt := 0; ; attempt++ {
		reused := s.up != nil && s.up.key == key && s.up.reusable
		if !reused {
			s.closeUpstream("")
			conn, ref := s.p.dial(s.ctx, t, s.act)
			if ref != nil {
				s.event(t.host, port, VerdictAllowed, ref.audit, nil)
				s.refuse(ref.status, ref.client)
				return false
			}
			s.up = &upstream{key: key, host: t.host, port: port, conn: conn, br: bufio.NewReaderSize(conn, s.p.opts.MaxHeaderBytes)}
		}
		up = s.up
		up.reusable = false
		downBefore := up.conn.down.Load()

		writeErr = make(chan error, 1)
		go func() {
			bw := bufio.NewWriterSize(up.conn, 4096)
			err := out.Write(bw)
			if err == nil {
				err = bw.Flush()
			}
			writeErr <- err
		}()

		var err error
		resp, err = readFinalResponse(up.br, out, s.client, s.p.opts.MaxHeaderBytes)
		if err == nil {
			break
		}
		_ = up.conn.Close()
		reason := "upstream response: " + err.Error()
		if werr := <-writeErr; werr != nil {
			reason += "; request: " + werr.Error()
		}
		// A kept-alive upstream may have closed while idle. Retry once on a
		// fresh connection when nothing came back, the request had no body
		// (nothing of the client's was consumed) and its method is safe to
		// repeat (the upstream may have seen it before closing).
		safe := req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodOptions
		retry := reused && attempt == 0 && safe && req.Body == http.NoBody && up.conn.down.Load() == downBefore
		s.closeUpstream(reason)
		if !retry {
			s.refuse(http.StatusBadGateway, fmt.Sprintf("bad response from %s", quoteHost(key)))
			return false
		}
	}
	defer func() { _ = resp.Body.Close() }()
	upstreamClose := resp.Close
	removeHopByHop(resp.Header)
	// Keep the client connection unless the response needs a close to
	// delimit its body (Response.Write then sets Close itself).
	resp.Close = clientClose
	cw := bufio.NewWriterSize(s.client, 4096)
	werr := resp.Write(cw)
	if werr == nil {
		werr = cw.Flush()
	}
	reqErr := <-writeErr
	if werr != nil || reqErr != nil {
		s.closeUpstream(firstErr("relay", werr, reqErr))
		return false
	}
	delimitedByClose := resp.ContentLength < 0 && !isChunked(resp.TransferEncoding) && resp.Request.Method != http.MethodHead && bodyAllowed(resp.StatusCode)
	up.reusable = !upstreamClose && !clientClose
	if !up.reusable {
		s.closeUpstream("")
	}
	return !clientClose && !delimitedByClose
}

// readFinalResponse reads the upstream's response, relaying interim 1xx
// responses (100 Continue) to the client.
func readFinalResponse(br *bufio.Reader, req *http.Request, client io.Writer, maxHeaderBytes int) (*http.Response, error) {
	for range 10 { // cap: a server sending endless 1xx responses
		// The same head cap as for requests: an allowed but hostile server
		// must not grow the host's memory with endless headers.
		if _, err := peekHead(br, maxHeaderBytes); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("unexpected protocol switch")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			removeHopByHop(resp.Header)
			if err := resp.Write(client); err != nil {
				return nil, err
			}
			continue
		}
		return resp, nil
	}
	return nil, errors.New("too many interim responses")
}

func (s *session) closeUpstream(reason string) {
	if s.up == nil {
		return
	}
	_ = s.up.conn.Close()
	s.event(s.up.host, s.up.port, VerdictAllowed, reason, s.up.conn)
	s.up = nil
}

func (s *session) event(host string, port uint16, verdict, reason string, c *countConn) {
	e := Event{
		Sandbox: s.sandbox,
		Host:    host,
		Port:    int(port),
		Verdict: verdict,
		Reason:  reason,
		Time:    s.p.opts.Now(),
	}
	if c != nil {
		e.BytesUp, e.BytesDown = c.up.Load(), c.down.Load()
		e.Time = c.start
	}
	s.p.opts.OnEvent(e)
}

// refuse writes a plain-text error response and ends the exchange.
func (s *session) refuse(status int, msg string) {
	body := "sandhold egress proxy: " + msg + "\n"
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	b.WriteString("X-Content-Type-Options: nosniff\r\n")
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n", len(body))
	b.WriteString(body)
	_, _ = s.client.Write(b.Bytes())
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

// hopByHop are the headers that describe one connection, not the message;
// a proxy must not forward them (RFC 9110 §7.6.1). Proxy-Authorization is
// among them: credentials for this proxy never reach an upstream.
func hopByHop() []string {
	return []string{
		"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	}
}

func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop() {
		h.Del(name)
	}
}

func isChunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

func bodyAllowed(status int) bool {
	return (status < 100 || status >= 200) && status != http.StatusNoContent && status != http.StatusNotModified
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

// activity is the time of the last byte moved in either direction of a
// connection, shared by its client and upstream sides so that a long
// one-way transfer does not trip the idle timeout of the quiet side.
type activity struct{ last atomic.Int64 }

func newActivity() *activity {
	a := &activity{}
	a.touch()
	return a
}

func (a *activity) touch()               { a.last.Store(time.Now().UnixNano()) }
func (a *activity) since() time.Duration { return time.Since(time.Unix(0, a.last.Load())) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// idleConn ends a connection after IdleTimeout without traffic in either
// direction of the session.
type idleConn struct {
	net.Conn
	idle time.Duration
	act  *activity
	// until, when set, is a hard read deadline regardless of activity. Only
	// the session goroutine sets it, while no other goroutine reads.
	until time.Time
}

func (c *idleConn) recentlyActive() bool { return c.act.since() < c.idle }

// CloseWrite half-closes the underlying connection when it can, else closes it.
func (c *idleConn) CloseWrite() error {
	closeWrite(c.Conn)
	return nil
}

func (c *idleConn) Read(b []byte) (int, error) {
	for {
		dl := time.Now().Add(c.idle)
		if !c.until.IsZero() && c.until.Before(dl) {
			dl = c.until
		}
		if err := c.SetReadDeadline(dl); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(b)
		if n > 0 {
			c.act.touch()
		}
		hardStop := !c.until.IsZero() && !time.Now().Before(c.until)
		if n == 0 && err != nil && isTimeout(err) && c.recentlyActive() && !hardStop {
			continue // the other direction is busy: keep waiting
		}
		return n, err
	}
}

func (c *idleConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		if err := c.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(b[written:])
		written += n
		if n > 0 {
			c.act.touch()
		}
		if err != nil {
			if isTimeout(err) && c.recentlyActive() {
				continue
			}
			return written, err
		}
	}
	return written, nil
}

// countConn counts bytes to (up) and from (down) the upstream.
type countConn struct {
	net.Conn
	up, down atomic.Int64
	// start is when the connection was opened (the event's time).
	start time.Time
}

// CloseWrite half-closes the upstream when it can, else closes it.
func (c *countConn) CloseWrite() error {
	closeWrite(c.Conn)
	return nil
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.down.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.up.Add(int64(n))
	return n, err
}
