package egress

// Integration tests of the proxy over real sockets. Every listener and every
// dial is on loopback: upstreams are httptest servers and echo servers on
// 127.0.0.1, and the proxy's dialer in these tests refuses any address that
// is not loopback, so a bug can never send traffic elsewhere.
//
// Loopback is denied by default, so each test that needs an allowed target
// lists it explicitly: "localhost:PORT" (a localhost entry permits the
// loopback at that port) or a test name plus "127.0.0.1:PORT" (the name
// matches, the resolved address is permitted only because it is listed).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const sandboxID = "sbx-test"

// loopbackDialer dials only loopback "ip:port" addresses and records them.
type loopbackDialer struct {
	t     *testing.T
	mu    sync.Mutex
	addrs []string
}

func (d *loopbackDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		d.t.Errorf("proxy dialed %q, not an ip:port", addr)
		return nil, fmt.Errorf("test dialer: not ip:port: %q", addr)
	}
	if !ap.Addr().IsLoopback() {
		d.t.Errorf("proxy tried to dial non-loopback %s", addr)
		return nil, fmt.Errorf("test dialer: refusing non-loopback %s", addr)
	}
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (d *loopbackDialer) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

type harness struct {
	t        *testing.T
	proxy    *Proxy
	addr     string
	dialer   *loopbackDialer
	resolver *fakeResolver
	events   chan Event
	accepted atomic.Int64
}

func newHarness(t *testing.T, allow []string, tweak func(*Options)) *harness {
	t.Helper()
	h := &harness{
		t:        t,
		dialer:   &loopbackDialer{t: t},
		resolver: newFakeResolver(map[string][]string{}),
		events:   make(chan Event, 1000),
	}
	opts := Options{
		Resolver:    h.resolver,
		Dial:        h.dialer.Dial,
		OnEvent:     func(e Event) { h.events <- e },
		DialTimeout: 5 * time.Second,
		Now:         func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
	}
	if tweak != nil {
		tweak(&opts)
	}
	h.proxy = New(opts)
	if allow != nil {
		if err := h.proxy.SetPolicy(sandboxID, Policy{Allow: allow}); err != nil {
			t.Fatalf("SetPolicy: %v", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			wg.Go(func() { h.proxy.ServeConn(ctx, sandboxID, c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		cancel()
		wg.Wait()
	})
	return h
}

// waitEvent returns the next event matching pred, failing the test if none
// comes (the bound is a safety net, not a timing assertion).
func (h *harness) waitEvent(pred func(Event) bool) Event {
	h.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-h.events:
			if pred(e) {
				return e
			}
		case <-timeout:
			h.t.Fatal("no matching egress event")
			return Event{}
		}
	}
}

func (h *harness) dialProxy() net.Conn {
	h.t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	h.t.Cleanup(func() { _ = c.Close() })
	return c
}

// result is a response read completely (its body closed).
type result struct {
	status        int
	header        http.Header
	body          string
	contentLength int64
}

// readResult reads one response for req (nil: GET) and its whole body; an
// established CONNECT tunnel has no body.
func readResult(t *testing.T, br *bufio.Reader, req *http.Request) result {
	t.Helper()
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	r := result{status: resp.StatusCode, header: resp.Header, contentLength: resp.ContentLength}
	if req != nil && req.Method == http.MethodConnect && resp.StatusCode == http.StatusOK {
		return r
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	r.body = string(b)
	return r
}

// get does a GET through cl and reads the whole response.
func get(t *testing.T, cl *http.Client, u string) result {
	t.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), contentLength: resp.ContentLength}
}

// connect sends a CONNECT and returns the connection and the response.
func (h *harness) connect(target, hostHeader string) (net.Conn, *bufio.Reader, result) {
	h.t.Helper()
	c := h.dialProxy()
	req := "CONNECT " + target + " HTTP/1.1\r\n"
	if hostHeader != "" {
		req += "Host: " + hostHeader + "\r\n"
	}
	req += "\r\n"
	mustWrite(h.t, c, req)
	br := bufio.NewReader(c)
	return c, br, readResult(h.t, br, &http.Request{Method: http.MethodConnect})
}

// raw sends raw request bytes and reads one response.
func (h *harness) raw(request string) result {
	h.t.Helper()
	c := h.dialProxy()
	mustWrite(h.t, c, request)
	return readResult(h.t, bufio.NewReader(c), nil)
}

func (h *harness) client() *http.Client {
	pu, _ := url.Parse("http://" + h.addr)
	return &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableCompression: true},
		Timeout:   20 * time.Second,
	}
}

// upstream is an HTTP server on 127.0.0.1 that counts its requests.
type testUpstream struct {
	srv   *httptest.Server
	port  string
	hits  atomic.Int64
	mu    sync.Mutex
	heads []http.Header
	hosts []string
}

func newUpstream(t *testing.T, name string, handler http.HandlerFunc) *testUpstream {
	return newUpstreamIdle(t, name, handler, 0)
}

// newUpstreamIdle starts an upstream whose server closes keep-alive
// connections idle for longer than idle (0: the default).
func newUpstreamIdle(t *testing.T, name string, handler http.HandlerFunc, idle time.Duration) *testUpstream {
	u := &testUpstream{}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.heads = append(u.heads, r.Header.Clone())
		u.hosts = append(u.hosts, r.Host)
		u.mu.Unlock()
		if handler != nil {
			handler(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintf(w, "hello from %s %s", name, r.URL.Path) //nolint:gosec // G705: a plain-text test server echoing the path
	}))
	u.srv.Config.IdleTimeout = idle
	u.srv.Start()
	t.Cleanup(u.srv.Close)
	_, u.port, _ = net.SplitHostPort(u.srv.Listener.Addr().String())
	return u
}

// echoServer echoes every byte back on 127.0.0.1.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func expectStatus(t *testing.T, r result, status int, bodyHas ...string) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d (%q), want %d", r.status, r.body, status)
	}
	for _, s := range bodyHas {
		if !strings.Contains(r.body, s) {
			t.Fatalf("body %q does not contain %q", r.body, s)
		}
	}
	return r.body
}

func TestAllowedPortThroughConnect(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"localhost:" + a.port}, nil)
	c, br, resp := h.connect("localhost:"+a.port, "localhost:"+a.port)
	if resp.status != http.StatusOK {
		t.Fatalf("CONNECT status %d", resp.status)
	}
	mustWrite(t, c, "GET /through-tunnel HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	inner := readResult(t, br, nil)
	expectStatus(t, inner, 200, "hello from A /through-tunnel")
	_ = c.Close()
	if h.resolver.wasAsked("localhost") {
		t.Fatal("localhost was resolved through DNS")
	}
	if d := h.dialer.dialed(); len(d) != 1 || d[0] != "127.0.0.1:"+a.port {
		t.Fatalf("dialed %v, want the checked address 127.0.0.1:%s", d, a.port)
	}
	e := h.waitEvent(func(e Event) bool { return true })
	if e.Verdict != VerdictAllowed || e.Host != "localhost" || strconv.Itoa(e.Port) != a.port || e.Sandbox != sandboxID {
		t.Fatalf("event %+v", e)
	}
	if e.BytesUp == 0 || e.BytesDown == 0 {
		t.Fatalf("event without byte counts: %+v", e)
	}
}

func TestAllowedPortThroughPlainHTTPKeepAlive(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"localhost:" + a.port}, nil)
	cl := h.client()
	for i := range 3 {
		resp := get(t, cl, fmt.Sprintf("http://localhost:%s/req%d", a.port, i))
		expectStatus(t, resp, 200, fmt.Sprintf("hello from A /req%d", i))
	}
	if n := a.hits.Load(); n != 3 {
		t.Fatalf("upstream saw %d requests, want 3", n)
	}
	if n := h.accepted.Load(); n != 1 {
		t.Fatalf("client opened %d proxy connections, want 1 (keep-alive)", n)
	}
	if d := h.dialer.dialed(); len(d) != 1 {
		t.Fatalf("proxy dialed %v, want one reused upstream connection", d)
	}
	a.mu.Lock()
	host := a.hosts[0]
	a.mu.Unlock()
	if host != "localhost:"+a.port {
		t.Fatalf("upstream saw Host %q", host)
	}
}

func TestRefusedPort(t *testing.T) {
	a := newUpstream(t, "A", nil)
	b := newUpstream(t, "B", nil)
	h := newHarness(t, []string{"localhost:" + a.port}, nil)

	_, _, resp := h.connect("localhost:"+b.port, "")
	msg := expectStatus(t, resp, http.StatusForbidden, `"localhost:`+b.port+`"`, `entry "localhost:`+a.port+`"`)
	if resp.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("content type %q", resp.header.Get("Content-Type"))
	}
	t.Logf("CONNECT refusal: %s", msg)

	r2 := get(t, h.client(), "http://localhost:"+b.port+"/")
	expectStatus(t, r2, http.StatusForbidden, "denied")
	if n := b.hits.Load(); n != 0 {
		t.Fatalf("refused upstream got %d requests", n)
	}
	if d := h.dialer.dialed(); len(d) != 0 {
		t.Fatalf("proxy dialed %v for refused requests", d)
	}
	e := h.waitEvent(func(e Event) bool { return true })
	if e.Verdict != VerdictDenied || e.Host != "localhost" || strconv.Itoa(e.Port) != b.port || e.Reason == "" {
		t.Fatalf("event %+v", e)
	}
}

func TestConnectToIPLiteralRefused(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"localhost:" + a.port, "allowed.test:" + a.port}, nil)
	for _, target := range []string{
		"127.0.0.1:" + a.port,
		"[::1]:" + a.port,
		"2130706433:" + a.port,
		"0177.0.0.1:" + a.port,
		"0x7f000001:" + a.port,
		"0x7f.1:" + a.port,
		"127.1:" + a.port,
		"[::ffff:127.0.0.1]:" + a.port,
		"169.254.169.254:80",
		"0.0.0.0:" + a.port,
	} {
		t.Run(target, func(t *testing.T) {
			_, _, resp := h.connect(target, "")
			expectStatus(t, resp, http.StatusForbidden, "denied")
		})
	}
	if d := h.dialer.dialed(); len(d) != 0 {
		t.Fatalf("proxy dialed %v", d)
	}
}

// An address entry is the explicit way to reach a loopback literal.
func TestIPLiteralAllowedOnlyBecauseListed(t *testing.T) {
	port := echoServer(t)
	h := newHarness(t, []string{"127.0.0.1:" + port}, nil)
	for _, target := range []string{"127.0.0.1:" + port, "2130706433:" + port} {
		c, br, resp := h.connect(target, "")
		if resp.status != 200 {
			t.Fatalf("CONNECT %s: %d", target, resp.status)
		}
		mustWrite(t, c, "ping")
		buf := make([]byte, 4)
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo through %s: %q %v", target, buf, err)
		}
		_ = c.Close()
	}
	// Listing the address does not open other loopback ports or ::1.
	for _, target := range []string{"127.0.0.1:1", "[::1]:" + port, "127.0.0.2:" + port} {
		_, _, resp := h.connect(target, "")
		expectStatus(t, resp, http.StatusForbidden)
	}
}

func TestSuffixTricksRefused(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"allowed.test:" + a.port, "127.0.0.1:" + a.port}, nil)
	for _, n := range []string{"allowed.test", "allowed.test.evil.test", "evilallowed.test", "allowed.test.evil"} {
		h.resolver.set(n, "127.0.0.1")
	}
	// Allowed forms first (case, trailing dot), then the tricks.
	for _, target := range []string{"allowed.test", "ALLOWED.Test."} {
		_, _, resp := h.connect(target+":"+a.port, "")
		expectStatus(t, resp, http.StatusOK)
	}
	for _, target := range []string{"allowed.test.evil.test", "evilallowed.test", "allowed.test.evil"} {
		t.Run(target, func(t *testing.T) {
			_, _, resp := h.connect(target+":"+a.port, "")
			expectStatus(t, resp, http.StatusForbidden, "not in this sandbox's egress allowlist")
			r2 := get(t, h.client(), "http://"+target+":"+a.port+"/")
			expectStatus(t, r2, http.StatusForbidden)
		})
	}
	// Userinfo cannot smuggle a listed name in front of another host.
	resp := h.raw("GET http://allowed.test:" + a.port + "@evil.test:" + a.port + "/ HTTP/1.1\r\nHost: evil.test:" + a.port + "\r\n\r\n")
	expectStatus(t, resp, http.StatusForbidden)
	resp = h.raw("CONNECT allowed.test@evil.test:" + a.port + " HTTP/1.1\r\n\r\n")
	expectStatus(t, resp, http.StatusBadRequest)
	if n := a.hits.Load(); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
}

func TestHostHeaderMismatchRefused(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"localhost:" + a.port}, nil)
	cases := []struct {
		name, request string
		status        int
	}{
		{"connect other host", "CONNECT localhost:" + a.port + " HTTP/1.1\r\nHost: evil.test:" + a.port + "\r\n\r\n", 403},
		{"connect other port", "CONNECT localhost:" + a.port + " HTTP/1.1\r\nHost: localhost:1\r\n\r\n", 403},
		{"absolute url other host", "GET http://localhost:" + a.port + "/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 403},
		{"absolute url default port in host", "GET http://localhost:" + a.port + "/ HTTP/1.1\r\nHost: localhost\r\n\r\n", 403},
		{"two host headers", "GET http://localhost:" + a.port + "/ HTTP/1.1\r\nHost: localhost:" + a.port + "\r\nHost: evil.test\r\n\r\n", 400},
		{"connect matching host", "CONNECT localhost:" + a.port + " HTTP/1.1\r\nHost: LOCALHOST.:" + a.port + "\r\n\r\n", 200},
		{"absolute url matching host", "GET http://localhost:" + a.port + "/ok HTTP/1.1\r\nHost: Localhost:" + a.port + "\r\nConnection: close\r\n\r\n", 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := h.dialProxy()
			mustWrite(t, c, tc.request)
			req := &http.Request{Method: strings.Fields(tc.request)[0]}
			resp := readResult(t, bufio.NewReader(c), req)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d", resp.status, tc.status)
			}
			if tc.status == 403 {
				expectStatus(t, resp, 403, "Host header")
			}
		})
	}
	if n := a.hits.Load(); n != 1 {
		t.Fatalf("upstream got %d requests, want 1 (the matching one)", n)
	}
}

func TestDNSRebindingRefused(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"public.test:" + a.port, "mixed.test:" + a.port, "meta.test", "listed.test:" + a.port, "127.0.0.1:" + a.port}, nil)
	// public.test looks public and is listed by name, but resolves to loopback.
	h.resolver.set("public.test", "127.0.0.1")
	// mixed.test resolves to a public address and loopback: every address
	// is checked, so the whole name is refused before any dial.
	h.resolver.set("mixed.test", "93.184.216.34", "127.0.0.1")
	h.resolver.set("meta.test", "169.254.169.254")
	h.resolver.set("listed.test", "127.0.0.1")
	// Make the listed IP irrelevant for public.test by using another port.
	h2 := newHarness(t, []string{"public.test:" + a.port}, nil)
	h2.resolver.set("public.test", "127.0.0.1")

	_, _, resp := h2.connect("public.test:"+a.port, "")
	expectStatus(t, resp, http.StatusForbidden, "a loopback address", "listed explicitly")
	r2 := get(t, h2.client(), "http://public.test:"+a.port+"/")
	expectStatus(t, r2, http.StatusForbidden, "a loopback address")
	e := h2.waitEvent(func(e Event) bool { return e.Verdict == VerdictDenied })
	if !strings.Contains(e.Reason, "127.0.0.1") {
		t.Fatalf("audit reason does not name the resolved address: %+v", e)
	}

	_, _, resp = h.connect("meta.test:80", "")
	expectStatus(t, resp, http.StatusForbidden, "link-local")
	// mixed.test: 127.0.0.1 is listed for this port, but 93.184.216.34 is
	// public, so it passes; the proxy dials checked addresses in order and
	// this test's dialer refuses the public one without sending anything.
	// So check instead with a name whose addresses include an unlisted
	// private one.
	h.resolver.set("mixed.test", "127.0.0.1", "10.0.0.1")
	_, _, resp = h.connect("mixed.test:"+a.port, "")
	expectStatus(t, resp, http.StatusForbidden, "a private address")
	// listed.test: allowed because 127.0.0.1:PORT is listed explicitly.
	_, _, resp = h.connect("listed.test:"+a.port, "")
	expectStatus(t, resp, http.StatusOK)

	for _, d := range append(h.dialer.dialed(), h2.dialer.dialed()...) {
		if d != "127.0.0.1:"+a.port {
			t.Fatalf("unexpected dial %s", d)
		}
	}
	if len(h2.dialer.dialed()) != 0 {
		t.Fatalf("rebinding name was dialed: %v", h2.dialer.dialed())
	}
}

func TestRedirectRelayedNotFollowed(t *testing.T) {
	b := newUpstream(t, "B", nil)
	a := newUpstream(t, "A", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+b.port+"/secret", http.StatusFound)
	})
	h := newHarness(t, []string{"localhost:" + a.port}, nil)

	cl := h.client()
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp := get(t, cl, "http://localhost:"+a.port+"/go")
	if resp.status != http.StatusFound || resp.header.Get("Location") != "http://localhost:"+b.port+"/secret" {
		t.Fatalf("redirect not relayed as is: %d %q", resp.status, resp.header.Get("Location"))
	}
	// A client that follows redirects gets the proxy's refusal for the
	// second hop: the follow-up is checked like any request.
	resp = get(t, h.client(), "http://localhost:"+a.port+"/go")
	expectStatus(t, resp, http.StatusForbidden, "denied")
	if n := b.hits.Load(); n != 0 {
		t.Fatalf("redirect target got %d requests", n)
	}
}

func TestHopByHopHeadersNotForwarded(t *testing.T) {
	a := newUpstream(t, "A", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Resp", "kept")
		_, _ = fmt.Fprint(w, "ok")
	})
	h := newHarness(t, []string{"localhost:" + a.port}, nil)
	req := "GET http://user:pw@localhost:" + a.port + "/h HTTP/1.1\r\n" +
		"Host: localhost:" + a.port + "\r\n" +
		"Proxy-Authorization: Basic c2VjcmV0OnNlY3JldA==\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"Connection: X-Hop, close\r\n" +
		"X-Hop: private\r\n" +
		"Keep-Alive: timeout=5\r\n" +
		"Te: trailers\r\n" +
		"Upgrade: websocket\r\n" +
		"X-Kept: yes\r\n\r\n"
	resp := h.raw(req)
	expectStatus(t, resp, 200, "ok")
	if resp.header.Get("X-Resp") != "kept" {
		t.Fatalf("response header lost: %v", resp.header)
	}
	a.mu.Lock()
	got := a.heads[0]
	a.mu.Unlock()
	for _, name := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop", "Keep-Alive", "Te", "Upgrade", "Authorization"} {
		if v := got.Get(name); v != "" {
			t.Errorf("upstream received %s: %q", name, v)
		}
	}
	if got.Get("X-Kept") != "yes" {
		t.Errorf("end-to-end header dropped: %v", got)
	}
	if got.Get("User-Agent") != "" {
		t.Errorf("proxy invented a User-Agent: %q", got.Get("User-Agent"))
	}
}

func TestEventsCarryByteCounts(t *testing.T) {
	port := echoServer(t)
	h := newHarness(t, []string{"localhost:" + port}, nil)
	c, br, resp := h.connect("localhost:"+port, "")
	if resp.status != 200 {
		t.Fatalf("CONNECT: %d", resp.status)
	}
	payload := strings.Repeat("x", 100_000)
	go func() { _, _ = io.WriteString(c, payload) }()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(br, got); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(br); err != nil {
		t.Fatal(err)
	}
	e := h.waitEvent(func(e Event) bool { return true })
	if e.Verdict != VerdictAllowed || e.BytesUp != int64(len(payload)) || e.BytesDown != int64(len(payload)) {
		t.Fatalf("event %+v, want %d bytes each way", e, len(payload))
	}
	if !e.Time.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("event time %v not from Options.Now", e.Time)
	}
}

func TestPolicyUpdateAtRuntime(t *testing.T) {
	a := newUpstream(t, "A", nil)
	b := newUpstream(t, "B", nil)
	h := newHarness(t, []string{"localhost:" + a.port}, nil)

	// A keep-alive plain HTTP connection established under the old policy.
	c := h.dialProxy()
	br := bufio.NewReader(c)
	send := func(port, path string) result {
		mustWrite(t, c, fmt.Sprintf("GET http://localhost:%s%s HTTP/1.1\r\nHost: localhost:%s\r\n\r\n", port, path, port))
		return readResult(t, br, nil)
	}
	expectStatus(t, send(a.port, "/1"), 200)

	if err := h.proxy.SetPolicy(sandboxID, Policy{Allow: []string{"localhost:" + b.port}}); err != nil {
		t.Fatal(err)
	}
	// The next request on the same connection is checked against the new
	// policy.
	expectStatus(t, send(a.port, "/2"), 403)
	_, _, resp := h.connect("localhost:"+a.port, "")
	expectStatus(t, resp, 403)
	_, _, resp = h.connect("localhost:"+b.port, "")
	expectStatus(t, resp, 200)

	// An invalid update is refused and leaves the policy in force.
	if err := h.proxy.SetPolicy(sandboxID, Policy{Allow: []string{"*"}}); err == nil {
		t.Fatal("invalid policy accepted")
	}
	_, _, resp = h.connect("localhost:"+b.port, "")
	expectStatus(t, resp, 200)
}

func TestRemoveClosesConnectionsAndDenies(t *testing.T) {
	port := echoServer(t)
	h := newHarness(t, []string{"localhost:" + port}, nil)
	c, br, resp := h.connect("localhost:"+port, "")
	if resp.status != 200 {
		t.Fatal(resp.status)
	}
	h.proxy.Remove(sandboxID)
	if _, err := io.ReadAll(br); err != nil && !isTimeout(err) {
		t.Logf("read after Remove: %v", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, _, resp = h.connect("localhost:"+port, "")
	expectStatus(t, resp, 403, "no egress allowlist")
}

func TestConnectionCapPerSandbox(t *testing.T) {
	port := echoServer(t)
	h := newHarness(t, []string{"localhost:" + port}, func(o *Options) { o.MaxConnsPerSandbox = 2 })
	var open []net.Conn
	for range 2 {
		c, _, resp := h.connect("localhost:"+port, "")
		if resp.status != 200 {
			t.Fatal(resp.status)
		}
		open = append(open, c)
	}
	_, _, resp := h.connect("localhost:"+port, "")
	expectStatus(t, resp, http.StatusTooManyRequests, "too many")
	if n := h.proxy.ActiveConns(sandboxID); n != 2 {
		t.Fatalf("ActiveConns = %d, want 2", n)
	}
	_ = open[0].Close()
	// The slot is freed once the proxy sees the close.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, resp := h.connect("localhost:"+port, "")
		status := resp.status
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot never freed, last status %d", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMalformedRequests(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"localhost:" + a.port}, func(o *Options) { o.MaxHeaderBytes = 4096 })
	cases := []struct {
		name, request string
		status        int
	}{
		{"garbage", "HELLO\r\n\r\n", 400},
		{"origin form", "GET / HTTP/1.1\r\nHost: localhost:" + a.port + "\r\n\r\n", 400},
		{"https absolute url", "GET https://localhost:" + a.port + "/ HTTP/1.1\r\n\r\n", 400},
		{"connect without port", "CONNECT localhost HTTP/1.1\r\n\r\n", 400},
		{"connect bad port", "CONNECT localhost:99999 HTTP/1.1\r\n\r\n", 400},
		{"connect path", "CONNECT /x HTTP/1.1\r\n\r\n", 400},
		{"huge header", "GET http://localhost:" + a.port + "/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 8000) + "\r\n\r\n", 431},
		{"folded host", "GET http://localhost:" + a.port + "/ HTTP/1.1\r\nX-A: b\r\n Host: evil\r\n\r\n", 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.raw(tc.request)
			b := expectStatus(t, resp, tc.status)
			if strings.Contains(b, "/") && strings.Contains(b, "go/") {
				t.Fatalf("refusal leaks a path: %q", b)
			}
		})
	}
	if n := a.hits.Load(); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
}

func TestDialFailureIs502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close() // nothing listens there now
	h := newHarness(t, []string{"localhost:" + port}, nil)
	_, _, resp := h.connect("localhost:"+port, "")
	b := expectStatus(t, resp, http.StatusBadGateway, "could not connect")
	if strings.Contains(b, "refused") || strings.Contains(b, "127.0.0.1") {
		t.Fatalf("502 leaks internal detail: %q", b)
	}
	e := h.waitEvent(func(Event) bool { return true })
	if e.Verdict != VerdictAllowed || !strings.Contains(e.Reason, "dial failed") {
		t.Fatalf("event %+v", e)
	}
}

func TestIdleTunnelIsClosed(t *testing.T) {
	port := echoServer(t)
	h := newHarness(t, []string{"localhost:" + port}, func(o *Options) { o.IdleTimeout = time.Second })
	c, br, resp := h.connect("localhost:"+port, "")
	if resp.status != 200 {
		t.Fatal(resp.status)
	}
	// Activity keeps it open: a few round trips spaced under the timeout.
	for range 3 {
		mustWrite(t, c, "x")
		if _, err := br.ReadByte(); err != nil {
			t.Fatalf("tunnel closed while active: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Silence ends it (the read deadline of 20 s is only a safety net).
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("idle tunnel still delivering data")
	} else if isTimeout(err) {
		t.Fatal("idle tunnel was never closed")
	}
}

func TestNoPolicyDeniesConnections(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, nil, nil)
	_, _, resp := h.connect("localhost:"+a.port, "")
	expectStatus(t, resp, 403, "no egress allowlist")
}

func TestHTTPFraming(t *testing.T) {
	a := newUpstream(t, "A", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			_, _ = fmt.Fprintf(w, "got %d bytes: %s", len(b), b[:min(len(b), 5)])
		case "/head":
			w.Header().Set("Content-Length", "1234")
		case "/continue":
			b, _ := io.ReadAll(r.Body)
			_, _ = fmt.Fprintf(w, "continued %s", b)
		default:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = fmt.Fprintf(w, "path %s", r.URL.Path) //nolint:gosec // G705: a plain-text test server echoing the path
		}
	})
	// A server that ends its body by closing the connection (no length).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")
			}()
		}
	}()
	_, closePort, _ := net.SplitHostPort(ln.Addr().String())
	h := newHarness(t, []string{"localhost:" + a.port, "localhost:" + closePort}, nil)

	t.Run("chunked request body", func(t *testing.T) {
		resp := h.raw("POST http://localhost:" + a.port + "/echo HTTP/1.1\r\nHost: localhost:" + a.port +
			"\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
		expectStatus(t, resp, 200, "got 11 bytes: hello")
	})
	t.Run("close-delimited response", func(t *testing.T) {
		resp := h.raw("GET http://localhost:" + closePort + "/ HTTP/1.1\r\nHost: localhost:" + closePort + "\r\n\r\n")
		expectStatus(t, resp, 200, "until close")
	})
	t.Run("head keeps the connection usable", func(t *testing.T) {
		c := h.dialProxy()
		br := bufio.NewReader(c)
		mustWrite(t, c, fmt.Sprintf("HEAD http://localhost:%s/head HTTP/1.1\r\nHost: localhost:%s\r\n\r\n", a.port, a.port))
		resp := readResult(t, br, &http.Request{Method: http.MethodHead})
		if resp.status != 200 || resp.contentLength != 1234 {
			t.Fatalf("HEAD: %d length %d", resp.status, resp.contentLength)
		}
		mustWrite(t, c, fmt.Sprintf("POST http://localhost:%s/echo HTTP/1.1\r\nHost: localhost:%s\r\nContent-Length: 3\r\n\r\nabc", a.port, a.port))
		resp = readResult(t, br, nil)
		expectStatus(t, resp, 200, "got 3 bytes: abc")
	})
	t.Run("pipelined requests", func(t *testing.T) {
		c := h.dialProxy()
		br := bufio.NewReader(c)
		mustWrite(t, c, fmt.Sprintf("GET http://localhost:%[1]s/p1 HTTP/1.1\r\nHost: localhost:%[1]s\r\n\r\nGET http://localhost:%[1]s/p2 HTTP/1.1\r\nHost: localhost:%[1]s\r\n\r\n", a.port))
		for _, want := range []string{"/p1", "/p2"} {
			resp := readResult(t, br, nil)
			expectStatus(t, resp, 200, want)
		}
	})
	t.Run("expect 100-continue", func(t *testing.T) {
		c := h.dialProxy()
		br := bufio.NewReader(c)
		mustWrite(t, c, fmt.Sprintf("POST http://localhost:%[1]s/continue HTTP/1.1\r\nHost: localhost:%[1]s\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n", a.port))
		resp := readResult(t, br, nil)
		if resp.status != http.StatusContinue {
			t.Fatalf("want 100 Continue relayed, got %d", resp.status)
		}
		mustWrite(t, c, "body")
		resp = readResult(t, br, nil)
		expectStatus(t, resp, 200, "continued body")
	})
}

func TestSlowHeadIsCut(t *testing.T) {
	// headerTimeout is a constant; this only checks that a partial head
	// followed by silence ends with the idle timeout rather than hanging.
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"localhost:" + a.port}, func(o *Options) { o.IdleTimeout = 100 * time.Millisecond })
	c := h.dialProxy()
	mustWrite(t, c, "GET http://localhost:"+a.port+"/ HTTP/1.1\r\n")
	resp := readResult(t, bufio.NewReader(c), nil)
	expectStatus(t, resp, http.StatusRequestTimeout)
}

func TestHugeUpstreamHeadIs502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
				line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
				for range 1000 { // 1 MB of headers, far above the cap
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	h := newHarness(t, []string{"localhost:" + port}, func(o *Options) { o.MaxHeaderBytes = 8192 })
	resp := h.raw("GET http://localhost:" + port + "/ HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n")
	expectStatus(t, resp, http.StatusBadGateway, "bad response")
}

func TestUnresolvableAllowedNameIs502(t *testing.T) {
	h := newHarness(t, []string{"gone.test"}, nil)
	_, _, resp := h.connect("gone.test:443", "")
	expectStatus(t, resp, http.StatusBadGateway, "could not resolve")
	e := h.waitEvent(func(Event) bool { return true })
	if e.Verdict != VerdictAllowed || e.Reason != "resolve failed" {
		t.Fatalf("event %+v", e)
	}
}

// An upstream that closes idle keep-alive connections must not turn the
// client's next request into a 502.
func TestReusedUpstreamClosedWhileIdle(t *testing.T) {
	a := newUpstreamIdle(t, "A", nil, 50*time.Millisecond)
	h := newHarness(t, []string{"localhost:" + a.port}, nil)
	c := h.dialProxy()
	br := bufio.NewReader(c)
	for i := range 2 {
		mustWrite(t, c, fmt.Sprintf("GET http://localhost:%[1]s/r%[2]d HTTP/1.1\r\nHost: localhost:%[1]s\r\n\r\n", a.port, i))
		resp := readResult(t, br, nil)
		expectStatus(t, resp, 200, fmt.Sprintf("/r%d", i))
		// Wait until the upstream has surely dropped the idle connection.
		time.Sleep(300 * time.Millisecond)
	}
	if n := a.hits.Load(); n != 2 {
		t.Fatalf("upstream saw %d requests, want 2 (no duplicate)", n)
	}
}

func mustWrite(t *testing.T, w io.Writer, s string) {
	t.Helper()
	if _, err := io.WriteString(w, s); err != nil {
		t.Fatal(err)
	}
}
