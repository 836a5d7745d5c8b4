package egress

// Routing tests: chaining through an upstream proxy (a small in-test HTTP
// CONNECT proxy and a SOCKS5 one that record what they saw), excludes,
// mappings, refusals by the allow list, masked passwords, saved state.
// As in proxy_test.go every socket is on loopback: the in-test upstreams
// "resolve" destination names through a table of local servers, and the
// proxy's dialer refuses anything but loopback — so a destination that
// would have been dialed directly instead of through the upstream fails
// the test.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// seenReq is what an in-test upstream proxy received.
type seenReq struct {
	method, target, auth string
}

// fakeUpstream is an upstream proxy on 127.0.0.1: HTTP (CONNECT and
// absolute-form requests) or SOCKS5. dests maps the destinations it is
// asked for to local addresses.
type fakeUpstream struct {
	t     *testing.T
	port  string
	socks bool
	// user and pass, when set, are the credentials it demands.
	user, pass string
	dests      map[string]string

	mu   sync.Mutex
	seen []seenReq
}

func newFakeUpstream(t *testing.T, socks bool, user, pass string, dests map[string]string) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{t: t, socks: socks, user: user, pass: pass, dests: dests}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	_, u.port, _ = net.SplitHostPort(ln.Addr().String())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				if u.socks {
					u.serveSOCKS(c)
				} else {
					u.serveHTTP(c)
				}
			}()
		}
	}()
	return u
}

func (u *fakeUpstream) record(s seenReq) {
	u.mu.Lock()
	u.seen = append(u.seen, s)
	u.mu.Unlock()
}

func (u *fakeUpstream) requests() []seenReq {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenReq(nil), u.seen...)
}

func (u *fakeUpstream) wantAuth() string {
	if u.user == "" {
		return ""
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(u.user+":"+u.pass))
}

func (u *fakeUpstream) serveHTTP(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	target := req.RequestURI
	u.record(seenReq{req.Method, target, req.Header.Get("Proxy-Authorization")})
	if want := u.wantAuth(); want != "" && req.Header.Get("Proxy-Authorization") != want {
		_, _ = io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"t\"\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if req.Method != http.MethodConnect {
		body := "via upstream " + req.Method + " " + target + " host=" + req.Host + " client-proxy-auth=" + req.Header.Get("X-Seen")
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		return
	}
	local, ok := u.dests[target]
	if !ok {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	d, err := net.Dial("tcp", local)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer func() { _ = d.Close() }()
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	pipe(c, br, d)
}

// serveSOCKS speaks RFC 1928 with RFC 1929 user/password when demanded.
func (u *fakeUpstream) serveSOCKS(c net.Conn) {
	br := bufio.NewReader(c)
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(br, hdr); err != nil || hdr[0] != 5 {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	auth := ""
	if u.user != "" {
		if !strings.ContainsRune(string(methods), 2) {
			_, _ = c.Write([]byte{5, 0xff})
			return
		}
		_, _ = c.Write([]byte{5, 2})
		b := make([]byte, 2)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		user := make([]byte, b[1])
		_, _ = io.ReadFull(br, user)
		pl := make([]byte, 1)
		_, _ = io.ReadFull(br, pl)
		pass := make([]byte, pl[0])
		_, _ = io.ReadFull(br, pass)
		auth = string(user) + ":" + string(pass)
		if string(user) != u.user || string(pass) != u.pass {
			_, _ = c.Write([]byte{1, 1})
			return
		}
		_, _ = c.Write([]byte{1, 0})
	} else {
		_, _ = c.Write([]byte{5, 0})
	}
	req := make([]byte, 4)
	if _, err := io.ReadFull(br, req); err != nil || req[1] != 1 {
		return
	}
	var host string
	switch req[3] {
	case 3:
		n, _ := br.ReadByte()
		name := make([]byte, n)
		_, _ = io.ReadFull(br, name)
		host = string(name)
	case 1:
		ip := make([]byte, 4)
		_, _ = io.ReadFull(br, ip)
		host = net.IP(ip).String()
	default:
		return
	}
	pb := make([]byte, 2)
	_, _ = io.ReadFull(br, pb)
	target := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(pb))))
	u.record(seenReq{"SOCKS5", target, auth})
	local, ok := u.dests[target]
	var d net.Conn
	var err error
	if ok {
		d, err = net.Dial("tcp", local)
	}
	if !ok || err != nil {
		_, _ = c.Write([]byte{5, 4, 0, 1, 0, 0, 0, 0, 0, 0}) // host unreachable
		return
	}
	defer func() { _ = d.Close() }()
	_, _ = c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
	pipe(c, br, d)
}

func pipe(c net.Conn, br io.Reader, d net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(d, br); closeWrite(d); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, d); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

// echoThroughConnect opens a CONNECT tunnel to target and checks that a
// line comes back (the destination is an echo server).
func echoThroughConnect(t *testing.T, h *harness, target string) {
	t.Helper()
	c, br, resp := h.connect(target, "")
	if resp.status != http.StatusOK {
		t.Fatalf("CONNECT %s: status %d %q", target, resp.status, resp.body)
	}
	mustWrite(t, c, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("through the tunnel: %q, %v", line, err)
	}
	_ = c.Close()
}

const publicAddr = "93.184.216.34" // a public address the test never dials

func TestUpstreamChainsConnectWithCredentials(t *testing.T) {
	echo := echoServer(t)
	up := newFakeUpstream(t, false, "agent", "p@ss:w0rd", map[string]string{"api.example.test:443": "127.0.0.1:" + echo})
	h := newHarness(t, []string{"api.example.test", "localhost:" + up.port}, nil)
	h.resolver.set("api.example.test", publicAddr)
	u, err := ParseUpstream("http://agent:p%40ss%3Aw0rd@localhost:" + up.port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.proxy.SetUpstream(context.Background(), sandboxID, u); err != nil {
		t.Fatal(err)
	}
	echoThroughConnect(t, h, "api.example.test:443")
	seen := up.requests()
	if len(seen) != 1 || seen[0].method != http.MethodConnect || seen[0].target != "api.example.test:443" || seen[0].auth != up.wantAuth() {
		t.Fatalf("upstream saw %+v, want one CONNECT api.example.test:443 with %q", seen, up.wantAuth())
	}
	if d := h.dialer.dialed(); len(d) != 1 || d[0] != "127.0.0.1:"+up.port {
		t.Fatalf("dialed %v, want only the upstream", d)
	}
	e := h.waitEvent(func(e Event) bool { return e.Verdict == VerdictAllowed })
	if e.Route != RouteUpstream || e.Via != "localhost:"+up.port || e.Host != "api.example.test" || e.Port != 443 {
		t.Fatalf("event %+v", e)
	}
	if e.BytesUp != int64(len("ping\n")) || e.BytesDown != int64(len("ping\n")) {
		t.Fatalf("event counts the handshake: up %d down %d", e.BytesUp, e.BytesDown)
	}
}

func TestUpstreamPlainHTTPInAbsoluteForm(t *testing.T) {
	up := newFakeUpstream(t, false, "agent", "secret", nil)
	h := newHarness(t, []string{"api.example.test", "localhost:" + up.port}, nil)
	h.resolver.set("api.example.test", publicAddr)
	u, _ := ParseUpstream("agent:secret@localhost:" + up.port)
	if _, err := h.proxy.SetUpstream(context.Background(), sandboxID, u); err != nil {
		t.Fatal(err)
	}
	c := h.dialProxy()
	mustWrite(t, c, "GET http://api.example.test/x?q=1 HTTP/1.1\r\nHost: api.example.test\r\nProxy-Authorization: Basic Y2xpZW50OmNsaWVudA==\r\nConnection: close\r\n\r\n")
	r := readResult(t, bufio.NewReader(c), nil)
	expectStatus(t, r, 200, "via upstream GET http://api.example.test/x?q=1 host=api.example.test")
	seen := up.requests()
	if len(seen) != 1 || seen[0].auth != up.wantAuth() {
		t.Fatalf("upstream saw %+v: the client's Proxy-Authorization must be replaced by the upstream's", seen)
	}
}

func TestUpstreamWrongCredentialsIs502(t *testing.T) {
	up := newFakeUpstream(t, false, "agent", "right", map[string]string{})
	h := newHarness(t, []string{"api.example.test", "localhost:" + up.port}, nil)
	h.resolver.set("api.example.test", publicAddr)
	u, _ := ParseUpstream("agent:wrong@localhost:" + up.port)
	if _, err := h.proxy.SetUpstream(context.Background(), sandboxID, u); err != nil {
		t.Fatal(err)
	}
	_, _, r := h.connect("api.example.test:443", "")
	body := expectStatus(t, r, http.StatusBadGateway, "407", "other credentials")
	if strings.Contains(body, "wrong") {
		t.Fatalf("refusal shows the password: %q", body)
	}
}

func TestSOCKS5Upstream(t *testing.T) {
	echo := echoServer(t)
	up := newFakeUpstream(t, true, "agent", "s0cks", map[string]string{"api.example.test:443": "127.0.0.1:" + echo})
	h := newHarness(t, []string{"api.example.test", "localhost:" + up.port}, nil)
	h.resolver.set("api.example.test", publicAddr)
	u, err := ParseUpstream("socks5h://agent:s0cks@localhost:" + up.port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.proxy.SetUpstream(context.Background(), sandboxID, u); err != nil {
		t.Fatal(err)
	}
	echoThroughConnect(t, h, "api.example.test:443")
	seen := up.requests()
	if len(seen) != 1 || seen[0].target != "api.example.test:443" || seen[0].auth != "agent:s0cks" {
		t.Fatalf("SOCKS5 upstream saw %+v, want the name and the credentials", seen)
	}
}

func TestExcludedDestinationGoesDirect(t *testing.T) {
	echo := echoServer(t)
	other := echoServer(t)
	up := newFakeUpstream(t, false, "", "", map[string]string{"api.example.test:443": "127.0.0.1:" + other})
	h := newHarness(t, []string{"api.example.test", "localhost:" + up.port, "localhost:" + echo}, nil)
	h.resolver.set("api.example.test", publicAddr)
	u, _ := ParseUpstream("localhost:" + up.port)
	if _, err := h.proxy.SetUpstream(context.Background(), sandboxID, u); err != nil {
		t.Fatal(err)
	}
	if _, err := h.proxy.AddExclude(sandboxID, ".localhost"); err != nil {
		t.Fatal(err)
	}
	echoThroughConnect(t, h, "localhost:"+echo)
	if seen := up.requests(); len(seen) != 0 {
		t.Fatalf("an excluded destination went through the upstream: %+v", seen)
	}
	e := h.waitEvent(func(e Event) bool { return e.Verdict == VerdictAllowed })
	if e.Route != RouteDirect || e.Via != "" {
		t.Fatalf("event %+v, want direct", e)
	}
	// A destination not excluded still goes through the upstream.
	echoThroughConnect(t, h, "api.example.test:443")
	if seen := up.requests(); len(seen) != 1 {
		t.Fatalf("upstream saw %+v", seen)
	}
	// Removing the exclude (any spelling) sends it through the upstream.
	if found, err := h.proxy.RemoveExclude(sandboxID, "*.LOCALHOST"); err != nil || !found {
		t.Fatalf("RemoveExclude: %v %v", found, err)
	}
	_, _, r := h.connect("localhost:"+echo, "")
	expectStatus(t, r, http.StatusBadGateway) // the upstream knows no such destination
	if seen := up.requests(); len(seen) != 2 || seen[1].target != "localhost:"+echo {
		t.Fatalf("upstream saw %+v", seen)
	}
}

func TestMappingRewritesDestination(t *testing.T) {
	a := newUpstream(t, "A", nil)
	h := newHarness(t, []string{"localhost:" + a.port}, nil)
	m, err := ParseMapping("myapp.test", "localhost.:"+a.port)
	if err != nil || !m.Loopback() {
		t.Fatalf("a localhost target is the sandbox's own loopback: %+v %v", m, err)
	}
	m, err = ParseMapping("http://myapp.test", "127.0.0.1:"+a.port)
	if err != nil || !m.Loopback() || m.SourcePort != 80 {
		t.Fatalf("ParseMapping: %+v %v", m, err)
	}
	// A host target: the allow list's localhost:PORT entry permits it.
	h.resolver.set("web.test", "127.0.0.1")
	if _, err := h.proxy.AddMapping(context.Background(), sandboxID, mustMapping(t, "*.myapp.test", "web.test:"+a.port)); err == nil {
		t.Fatal("a mapping to a host the allow list does not permit was accepted")
	}
	if err := h.proxy.SetPolicy(sandboxID, Policy{Allow: []string{"web.test:" + a.port, "127.0.0.1:" + a.port}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.proxy.AddMapping(context.Background(), sandboxID, mustMapping(t, "*.myapp.test", "web.test:"+a.port)); err != nil {
		t.Fatal(err)
	}
	cl := h.client()
	r := get(t, cl, "http://api.myapp.test/hello")
	cl.CloseIdleConnections() // the event is sent when the connection ends
	expectStatus(t, r, 200, "hello from A /hello")
	a.mu.Lock()
	hosts := a.hosts
	a.mu.Unlock()
	if len(hosts) != 1 || hosts[0] != "web.test:"+a.port {
		t.Fatalf("upstream saw Host %v, want the mapped target", hosts)
	}
	e := h.waitEvent(func(e Event) bool { return e.Verdict == VerdictAllowed })
	if e.Host != "web.test" || e.MappedFrom != "api.myapp.test:80" {
		t.Fatalf("event %+v", e)
	}
	// The source is not in the allow list: without the mapping it is refused.
	if found, err := h.proxy.RemoveMapping(sandboxID, "*.MYAPP.test"); err != nil || !found {
		t.Fatalf("RemoveMapping: %v %v", found, err)
	}
	_, _, res := h.connect("api.myapp.test:80", "")
	expectStatus(t, res, http.StatusForbidden, "not in this sandbox's egress allowlist")
}

func mustMapping(t *testing.T, source, target string) Mapping {
	t.Helper()
	m, err := ParseMapping(source, target)
	if err != nil {
		t.Fatalf("ParseMapping(%q, %q): %v", source, target, err)
	}
	return m
}

func TestAllowListStaysTheBoundary(t *testing.T) {
	a := newUpstream(t, "A", nil)
	up := newFakeUpstream(t, false, "", "", nil)
	h := newHarness(t, []string{"web.test:" + a.port, "127.0.0.1:" + a.port, "localhost:" + up.port, "api.example.test"}, nil)
	h.resolver.set("api.example.test", publicAddr)
	h.resolver.set("web.test", "127.0.0.1")
	ctx := context.Background()

	// Set-time refusals name the allow list.
	var ie *InputError
	_, err := h.proxy.SetUpstream(ctx, sandboxID, mustUpstream(t, "proxy.elsewhere.test:3128"))
	if !errors.As(err, &ie) || ie.Field != "server" || !strings.Contains(err.Error(), "allow list") {
		t.Fatalf("unlisted upstream: %v", err)
	}
	_, err = h.proxy.AddMapping(ctx, sandboxID, mustMapping(t, "api.example.test", "10.0.0.5:80"))
	if !errors.As(err, &ie) || ie.Field != "target" {
		t.Fatalf("mapping to a private address: %v", err)
	}
	// A destination the allow list refuses is refused with an upstream too
	// (the upstream could reach anything).
	if _, err := h.proxy.SetUpstream(ctx, sandboxID, mustUpstream(t, "localhost:"+up.port)); err != nil {
		t.Fatal(err)
	}
	_, _, r := h.connect("unlisted.example.test:443", "")
	expectStatus(t, r, http.StatusForbidden)
	if seen := up.requests(); len(seen) != 0 {
		t.Fatalf("a refused destination reached the upstream: %+v", seen)
	}
	// Mappings and the upstream set while allowed are checked again on each
	// connection: once the allow list drops them, connections are refused
	// (not sent direct, not sent to the old target).
	if _, err := h.proxy.AddMapping(ctx, sandboxID, mustMapping(t, "mapped.test", "web.test:"+a.port)); err != nil {
		t.Fatal(err)
	}
	if err := h.proxy.SetPolicy(sandboxID, Policy{Allow: []string{"api.example.test", "mapped.test"}}); err != nil {
		t.Fatal(err)
	}
	_, _, r = h.connect("mapped.test:443", "")
	expectStatus(t, r, http.StatusForbidden, `mapped from "mapped.test:443"`)
	_, _, r = h.connect("api.example.test:443", "")
	expectStatus(t, r, http.StatusForbidden, "upstream proxy")
	if a.hits.Load() != 0 || len(up.requests()) != 0 {
		t.Fatal("traffic left after the allow list dropped its targets")
	}
	if d := h.dialer.dialed(); len(d) != 0 {
		t.Fatalf("dialed %v", d)
	}
	hl, err := h.proxy.Health(ctx, sandboxID)
	if err != nil || hl.Healthy() || len(hl.Inconsistencies) != 2 {
		t.Fatalf("health %+v %v, want two inconsistencies", hl, err)
	}
}

func mustUpstream(t *testing.T, s string) Upstream {
	t.Helper()
	u, err := ParseUpstream(s)
	if err != nil {
		t.Fatalf("ParseUpstream(%q): %v", s, err)
	}
	return u
}

func TestMappingIntoTheSandbox(t *testing.T) {
	echo := echoServer(t)
	var asked []uint16
	var mu sync.Mutex
	h := newHarness(t, []string{}, func(o *Options) {
		o.DialSandbox = func(ctx context.Context, id string, port uint16) (net.Conn, error) {
			mu.Lock()
			asked = append(asked, port)
			mu.Unlock()
			if id != sandboxID {
				return nil, errors.New("wrong sandbox")
			}
			return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+echo) // stands for the sandbox's port
		}
	})
	h.proxy.opts.SandboxPorts = []uint16{3000}
	if _, err := h.proxy.AddMapping(context.Background(), sandboxID, mustMapping(t, "dev.test", ":3128")); err == nil {
		t.Fatal("a mapping to a port the server does not reach in the sandbox was accepted")
	}
	if _, err := h.proxy.AddMapping(context.Background(), sandboxID, mustMapping(t, "dev.test", ":3000")); err != nil {
		t.Fatal(err)
	}
	echoThroughConnect(t, h, "dev.test:443")
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != 3000 {
		t.Fatalf("DialSandbox asked for %v, want port 3000", asked)
	}
	if h.resolver.wasAsked("dev.test") {
		t.Fatal("a mapped source was resolved")
	}
	e := h.waitEvent(func(e Event) bool { return e.Verdict == VerdictAllowed })
	if e.Route != RouteSandbox || e.Port != 3000 || e.MappedFrom != "dev.test:443" {
		t.Fatalf("event %+v", e)
	}
}

func TestPasswordNeverShown(t *testing.T) {
	u := mustUpstream(t, "http://bob:hunter2secret@proxy.example.test:3128")
	shown := []string{u.String(), u.Masked().Password, u.Masked().String()}
	r := Routing{Upstream: &u}.Masked()
	shown = append(shown, r.Upstream.Password)
	for _, s := range shown {
		if strings.Contains(s, "hunter2secret") {
			t.Fatalf("password shown: %q", s)
		}
	}
	if u.Password != "hunter2secret" || r.Upstream.Password != PasswordMask || u.String() != "http://bob:"+PasswordMask+"@proxy.example.test:3128" {
		t.Fatalf("upstream %+v, masked %+v, string %q", u, r.Upstream, u.String())
	}
	// Masking copies: the proxy's own value keeps the password.
	if u.Password != "hunter2secret" {
		t.Fatal("Masked changed the original")
	}
}

func TestRoutingSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	up := newFakeUpstream(t, false, "", "", nil)
	allow := []string{"localhost:" + up.port, "api.example.test", "web.example.test"}
	h := newHarness(t, allow, func(o *Options) { o.StateDir = dir })
	h.resolver.set("web.example.test", publicAddr)
	ctx := context.Background()
	if _, err := h.proxy.SetUpstream(ctx, sandboxID, mustUpstream(t, "u:topsecret@localhost:"+up.port)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.proxy.AddExclude(sandboxID, "*.internal.test"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.proxy.AddMapping(ctx, sandboxID, mustMapping(t, "api.example.test", "web.example.test:443")); err != nil {
		t.Fatal(err)
	}
	want, _ := h.proxy.RoutingOf(sandboxID)
	path := filepath.Join(dir, sandboxID+".json")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v, want mode 0600", fi, err)
	}

	// A new proxy (the restarted server) finds it when the policy is set.
	p2 := New(Options{StateDir: dir})
	if _, err := p2.RoutingOf(sandboxID); !errors.Is(err, ErrNotProxied) {
		t.Fatalf("routing before the policy: %v", err)
	}
	if err := p2.SetPolicy(sandboxID, Policy{Allow: allow}); err != nil {
		t.Fatal(err)
	}
	got, err := p2.RoutingOf(sandboxID)
	if err != nil || got.Upstream == nil || *got.Upstream != *want.Upstream || strings.Join(got.Excludes, ",") != "*.internal.test" || len(got.Mappings) != 1 || got.Mappings[0] != want.Mappings[0] {
		t.Fatalf("after restart %+v, want %+v (%v)", got, want, err)
	}
	// A state file for a sandbox that is gone is pruned; the live one stays.
	if err := os.WriteFile(filepath.Join(dir, "sbx-gone.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p2.PruneState(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sbx-gone.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale state kept: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("live state pruned: %v", err)
	}
	// Remove (delete, or out of mode proxy) ends the routing and its file.
	p2.Remove(sandboxID)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state file after Remove: %v", err)
	}
}

func TestUnreadableStateRefusesConnections(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, sandboxID+".json"), []byte(`{"upstream":`), 0o600); err != nil {
		t.Fatal(err)
	}
	echo := echoServer(t)
	h := newHarness(t, []string{"localhost:" + echo}, func(o *Options) { o.StateDir = dir })
	_, _, r := h.connect("localhost:"+echo, "")
	expectStatus(t, r, http.StatusServiceUnavailable, "could not be restored")
	hl, err := h.proxy.Health(context.Background(), sandboxID)
	if err != nil || hl.Healthy() || len(hl.Inconsistencies) != 1 {
		t.Fatalf("health %+v %v", hl, err)
	}
	// Setting the routing again (here: removing the upstream) repairs it.
	if _, err := h.proxy.RemoveUpstream(sandboxID); err != nil {
		t.Fatal(err)
	}
	echoThroughConnect(t, h, "localhost:"+echo)
}

func TestDiagnoseAndHealth(t *testing.T) {
	echo := echoServer(t)
	up := newFakeUpstream(t, false, "", "", map[string]string{"api.example.test:443": "127.0.0.1:" + echo})
	h := newHarness(t, []string{"api.example.test", "localhost:" + up.port, "localhost:" + echo}, nil)
	h.resolver.set("api.example.test", publicAddr)
	ctx := context.Background()

	d, err := h.proxy.Diagnose(ctx, sandboxID, "http://localhost:"+echo+"/x")
	if err != nil || d.Route != RouteDirect || !d.Reachable || d.Target != "localhost:"+echo {
		t.Fatalf("direct: %+v %v", d, err)
	}
	d, _ = h.proxy.Diagnose(ctx, sandboxID, "https://unlisted.example.test/")
	if d.Route != RouteDenied || d.Reachable || !strings.Contains(d.Reason, "allowlist") {
		t.Fatalf("unlisted: %+v", d)
	}
	if _, err := h.proxy.SetUpstream(ctx, sandboxID, mustUpstream(t, "localhost:"+up.port)); err != nil {
		t.Fatal(err)
	}
	d, _ = h.proxy.Diagnose(ctx, sandboxID, "https://api.example.test/")
	if d.Route != RouteUpstream || !d.Reachable || d.Via != "localhost:"+up.port {
		t.Fatalf("through the upstream: %+v", d)
	}
	if seen := up.requests(); len(seen) != 1 || seen[0].target != "api.example.test:443" {
		t.Fatalf("diagnose did not connect through the upstream: %+v", seen)
	}
	d, _ = h.proxy.Diagnose(ctx, sandboxID, "https://api.example.test:8443/")
	if d.Route != RouteDenied {
		t.Fatalf("port not listed: %+v", d)
	}
	if _, err := h.proxy.Diagnose(ctx, sandboxID, "ftp://api.example.test/"); err == nil {
		t.Fatal("an ftp URL was diagnosed")
	}

	hl, err := h.proxy.Health(ctx, sandboxID)
	if err != nil || !hl.Healthy() || hl.UpstreamReachable == nil || !*hl.UpstreamReachable {
		t.Fatalf("health %+v %v", hl, err)
	}
	// An upstream that does not answer makes the health false.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	_, deadPort, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	if err := h.proxy.SetPolicy(sandboxID, Policy{Allow: []string{"localhost:" + deadPort}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.proxy.SetUpstream(ctx, sandboxID, mustUpstream(t, "localhost:"+deadPort)); err != nil {
		t.Fatal(err)
	}
	hl, _ = h.proxy.Health(ctx, sandboxID)
	if hl.Healthy() || hl.UpstreamReachable == nil || *hl.UpstreamReachable || hl.UpstreamError == "" {
		t.Fatalf("dead upstream: %+v", hl)
	}
	// A sandbox without the proxy has nothing to report.
	if _, err := h.proxy.Health(ctx, "sbx-other"); !errors.Is(err, ErrNotProxied) {
		t.Fatalf("health of a sandbox without a policy: %v", err)
	}
}

func TestParseUpstream(t *testing.T) {
	good := []struct{ in, scheme, addr, user, pass string }{
		{"proxy.example.com:3128", "http", "proxy.example.com:3128", "", ""},
		{"user:token@proxy.example.com:8080", "http", "proxy.example.com:8080", "user", "token"},
		{"http://u:p%40ss@[2001:db8::1]:3128/", "http", "[2001:db8::1]:3128", "u", "p@ss"},
		{"socks5://u:p@Proxy.Example.COM:1080", "socks5", "proxy.example.com:1080", "u", "p"},
		{"socks5h://10.1.2.3:1080", "socks5", "10.1.2.3:1080", "", ""},
		{"u:a:b@h.test:1", "http", "h.test:1", "u", "a:b"},
		{"u:p@ss@h.test:1", "http", "h.test:1", "u", "p@ss"},
	}
	for _, c := range good {
		u, err := ParseUpstream(c.in)
		if err != nil || u.Scheme != c.scheme || u.Addr() != c.addr || u.Username != c.user || u.Password != c.pass {
			t.Errorf("ParseUpstream(%q) = %+v, %v", c.in, u, err)
		}
	}
	bad := []string{"", "proxy.example.com", "https://proxy:443", "ftp://p:21", "p.test:0", "p.test:99999",
		":pass@p.test:1", "p.test:1/path", "u:p\r\n@p.test:1", "p.test:1\nX: y", "0x7f.1:80x", strings.Repeat("a", 3000) + ":1"}
	for _, s := range bad {
		if u, err := ParseUpstream(s); err == nil {
			t.Errorf("ParseUpstream(%q) accepted: %+v", s, u)
		}
	}
}

func TestParseMapping(t *testing.T) {
	good := []struct {
		src, dst   string
		host       string
		port       uint16
		targetHost string
		targetPort uint16
	}{
		{"myapp.com", ":3000", "myapp.com", 0, "", 3000},
		{"myapp.com", "3000", "myapp.com", 0, "", 3000},
		{"https://api.MyApp.com/", "127.0.0.1:8081/", "api.myapp.com", 443, "", 8081},
		{"*.staging.app.com", "localhost:5173", "*.staging.app.com", 0, "", 5173},
		{"api.myapp.com:8443/*", "backend.example.net:443", "api.myapp.com", 8443, "backend.example.net", 443},
		{"a.test", "[::1]:80", "a.test", 0, "", 80},
		{"a.test", "192.168.1.5:3000", "a.test", 0, "192.168.1.5", 3000},
	}
	for _, c := range good {
		m, err := ParseMapping(c.src, c.dst)
		if err != nil || m.SourceHost != c.host || m.SourcePort != c.port || m.TargetHost != c.targetHost || m.TargetPort != c.targetPort {
			t.Errorf("ParseMapping(%q, %q) = %+v, %v", c.src, c.dst, m, err)
		}
	}
	bad := [][2]string{
		{"api.myapp.com/v1/*", ":3000"}, // paths are not routed
		{"a.test", ":3000/v1/"},
		{"ftp://a.test", ":21"},
		{"*.com", ":80"},
		{"a*.test", ":80"},
		{"*.10.0.0.1", ":80"},
		{"a.test", "b.test"}, // no port
		{"a.test", "http://b.test:80"},
		{"", ":80"},
		{"a.test", ""},
		{"a.test", ":0"},
	}
	for _, c := range bad {
		if m, err := ParseMapping(c[0], c[1]); err == nil {
			t.Errorf("ParseMapping(%q, %q) accepted: %+v", c[0], c[1], m)
		}
	}
}

func TestExcludePatterns(t *testing.T) {
	cases := []struct {
		pattern string
		host    string
		addrs   []string
		want    bool
	}{
		{"*.internal.company.com", "a.internal.company.com", nil, true},
		{".internal.company.com", "internal.company.com", nil, true},
		{"internal.company.com", "a.internal.company.com", nil, false},
		{"Internal.Company.com.", "internal.company.com", nil, true},
		{"10.0.0.0/8", "db.test", []string{"10.1.2.3"}, true},
		{"10.0.0.0/8", "db.test", []string{"10.1.2.3", "93.184.216.34"}, false},
		{"10.0.0.0/8", "db.test", nil, false},
		{"93.184.216.34", "93.184.216.34", []string{"93.184.216.34"}, true},
	}
	for _, c := range cases {
		e, err := parseExclude(c.pattern)
		if err != nil {
			t.Errorf("parseExclude(%q): %v", c.pattern, err)
			continue
		}
		tg := target{host: c.host}
		for _, a := range c.addrs {
			tg.addrs = append(tg.addrs, mustAddr(t, a))
		}
		if got := e.matches(tg); got != c.want {
			t.Errorf("%q matches %s %v = %v, want %v", c.pattern, c.host, c.addrs, got, c.want)
		}
	}
	for _, p := range []string{"", "*", "a*.test", "*.10.0.0.1", "10.0.0.0/33", "a\x00b"} {
		if _, err := parseExclude(p); err == nil {
			t.Errorf("parseExclude(%q) accepted", p)
		}
	}
}

func TestRoutingNeedsAProxiedSandbox(t *testing.T) {
	p := New(Options{})
	ctx := context.Background()
	if _, err := p.SetUpstream(ctx, "sbx-none", mustUpstream(t, "p.test:1")); !errors.Is(err, ErrNotProxied) {
		t.Errorf("SetUpstream: %v", err)
	}
	if _, err := p.AddExclude("sbx-none", "a.test"); !errors.Is(err, ErrNotProxied) {
		t.Errorf("AddExclude: %v", err)
	}
	if _, err := p.Diagnose(ctx, "sbx-none", "http://a.test/"); !errors.Is(err, ErrNotProxied) {
		t.Errorf("Diagnose: %v", err)
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
