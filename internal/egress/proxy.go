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
	"net"
	"net/http"
	"os"
	"sync"
	"time"
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
	// Route is RouteDirect, RouteUpstream or RouteSandbox ("" when the
	// request was refused before a route was decided).
	Route string
	// Via is the upstream proxy's host:port (RouteUpstream); never its
	// credentials.
	Via string
	// MappedFrom is the destination the client asked for when a mapping
	// sent it to Host:Port instead.
	MappedFrom string
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
	// StateDir, when set, keeps each sandbox's routing (upstream,
	// excludes, mappings) in a 0600 file of its own, so a restart finds it
	// again. Empty: routing lives in memory only.
	StateDir string
	// DialSandbox connects to a port on the sandbox's own loopback (through
	// its init); mappings to the sandbox's loopback need it. It is trusted
	// to refuse ports the server does not open into sandboxes.
	DialSandbox func(ctx context.Context, sandboxID string, port uint16) (net.Conn, error)
	// SandboxPorts, when set, are the ports DialSandbox reaches: a mapping
	// to another port of the sandbox is refused when it is added.
	SandboxPorts []uint16
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
	// routes is the routing snapshot (never nil), replaced on each change.
	routes *routes
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
// error the previous policy stays in force. The first policy of a sandbox
// brings back its saved routing (Options.StateDir).
func (p *Proxy) SetPolicy(sandboxID string, pol Policy) error {
	a, err := ParsePolicy(pol)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.sandboxes[sandboxID]
	if st == nil {
		rt, err := p.loadRouting(sandboxID)
		if err != nil {
			// Neither drop the routing silently nor let connections
			// bypass an upstream the sandbox relied on: the sandbox's
			// connections are refused, saying why, until its routing is
			// set again (Health reports it too).
			rt = &routes{r: Routing{}.clone(), broken: err.Error()}
		}
		st = &sandboxState{conns: make(map[net.Conn]struct{}), routes: rt}
		p.sandboxes[sandboxID] = st
	}
	st.allow = a
	return nil
}

// Remove forgets a sandbox's policy and routing (its saved state too) and
// closes its live connections.
func (p *Proxy) Remove(sandboxID string) {
	p.mu.Lock()
	var conns []net.Conn
	if st := p.sandboxes[sandboxID]; st != nil {
		for c := range st.conns {
			conns = append(conns, c)
		}
	}
	delete(p.sandboxes, sandboxID)
	if path, err := p.statePath(sandboxID); err == nil && path != "" {
		_ = os.Remove(path) // absent when there was no routing
	}
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
	key      string // route, upstream proxy and canonical "host:port"
	pl       plan
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

func (s *session) closeUpstream(reason string) {
	if s.up == nil {
		return
	}
	_ = s.up.conn.Close()
	s.eventFor(&s.up.pl, "", VerdictAllowed, reason, s.up.conn)
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

// eventFor reports an attempt along a plan; raw names the target when it
// could not be read.
func (s *session) eventFor(pl *plan, raw, verdict, reason string, c *countConn) {
	e := Event{
		Sandbox:    s.sandbox,
		Host:       hostOr(pl.t.host, raw),
		Port:       int(pl.t.port),
		Verdict:    verdict,
		Reason:     reason,
		Time:       s.p.opts.Now(),
		Route:      pl.route,
		Via:        pl.viaAddr(),
		MappedFrom: pl.mappedFrom(),
	}
	if verdict != VerdictAllowed {
		e.Route = ""
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
