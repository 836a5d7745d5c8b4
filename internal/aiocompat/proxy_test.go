package aiocompat_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// AIO's proxy namespace (11 operations) on sandhold's egress proxy: the
// conformance run at both prefixes (the default sandbox is in network mode
// none, where every operation is a tool-level failure saying why; a
// sandbox in mode proxy, where each succeeds), and an end-to-end check
// that an upstream set over the AIO route carries a command's curl.

// recordingProxy is an upstream proxy on the host's loopback: CONNECT
// tunnels to local ports, and absolute-form requests answered itself. It
// records each request line and its Proxy-Authorization.
type recordingProxy struct {
	port int
	mu   sync.Mutex
	seen []string // "METHOD target auth"
}

func newRecordingProxy(t *testing.T) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &recordingProxy{port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *recordingProxy) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.seen = append(p.seen, req.Method+" "+req.RequestURI+" "+req.Header.Get("Proxy-Authorization"))
	p.mu.Unlock()
	if req.Method != http.MethodConnect {
		body := "via upstream " + req.RequestURI
		_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		return
	}
	host, port, err := net.SplitHostPort(req.RequestURI)
	if err != nil || host != "localhost" {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	d, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer func() { _ = d.Close() }()
	_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{})
	go func() { _, _ = io.Copy(d, br); close(done) }()
	_, _ = io.Copy(c, d)
	<-done
}

func (p *recordingProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// proxyOps lists AIO's operations tagged proxy: "METHOD path" → whether
// it documents a JSON body.
func proxyOps(t *testing.T) map[string]bool {
	t.Helper()
	p, err := aiotest.Find()
	if err != nil {
		t.Skipf("AIO reference OpenAPI document not available (%v)", err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Tags        []string `json:"tags"`
			RequestBody struct {
				Content map[string]any `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if len(op.Tags) > 0 && op.Tags[0] == "proxy" {
				_, jsonBody := op.RequestBody.Content["application/json"]
				ops[strings.ToUpper(method)+" "+path] = jsonBody
			}
		}
	}
	return ops
}

// proxySteps call every proxy operation; fail is the answer of a sandbox
// whose network mode has no proxy.
func proxySteps(upstreamPort int, fail bool) []step {
	server := fmt.Sprintf("agent:s3cret-pw@localhost:%d", upstreamPort)
	return []step{
		{method: "GET", path: "/v1/proxy/upstream", fail: fail},
		{method: "PUT", path: "/v1/proxy/upstream", body: map[string]any{"server": server}, fail: fail},
		{method: "PUT", path: "/v1/proxy/upstream", body: map[string]any{"server": "proxy.not-listed.example:3128"}, fail: true},
		{method: "PUT", path: "/v1/proxy/upstream", body: map[string]any{"server": server, "auth_cmd": "echo u:p"}, fail: true},
		{method: "GET", path: "/v1/proxy/upstream", fail: fail},
		{method: "GET", path: "/v1/proxy/health", fail: fail},
		{method: "POST", path: "/v1/proxy/excludes", body: map[string]any{"pattern": "*.internal.example"}, fail: fail},
		{method: "GET", path: "/v1/proxy/excludes", fail: fail},
		{method: "DELETE", path: "/v1/proxy/excludes", body: map[string]any{"pattern": ".internal.example"}, fail: fail},
		{method: "POST", path: "/v1/proxy/mappings", body: map[string]any{"source": "myapp.example", "target": ":3000"}, fail: fail},
		{method: "POST", path: "/v1/proxy/mappings", body: map[string]any{"source": "other.example", "target": "10.0.0.5:80"}, fail: true},
		{method: "GET", path: "/v1/proxy/mappings", fail: fail},
		{method: "GET", path: "/v1/proxy/diagnose", query: "url=" + url.QueryEscape("http://myapp.example/x"), fail: fail},
		{method: "GET", path: "/v1/proxy/diagnose", query: "url=" + url.QueryEscape("https://not-listed.example/"), fail: fail},
		{method: "DELETE", path: "/v1/proxy/mappings/{source}", params: map[string]string{"source": "myapp.example"}, fail: fail},
		{method: "DELETE", path: "/v1/proxy/mappings/{source}", params: map[string]string{"source": "myapp.example"}, fail: true},
		{method: "DELETE", path: "/v1/proxy/upstream", fail: fail},
	}
}

// TestAIOProxyConformance calls AIO's 11 proxy operations at /v1/... and
// /sandboxes/{id}/v1/... and validates every answer against AIO's schemas.
func TestAIOProxyConformance(t *testing.T) {
	v := aiotest.Load(t)
	ops := proxyOps(t)
	if len(ops) != 11 {
		t.Fatalf("AIO's document has %d proxy operations, this test knows 11", len(ops))
	}
	s := startProxyServer(t)
	up := newRecordingProxy(t)
	var created struct {
		ID string `json:"id"`
	}
	s.c.JSON("POST", "/v1/sandboxes", map[string]any{"name": "proxy-conformance",
		"network": map[string]any{"mode": "proxy", "allow": []string{"localhost:" + strconv.Itoa(up.port)}}}, http.StatusCreated, &created)

	covered := map[string]bool{}
	for _, prefix := range []struct {
		url, pattern string
		fail         bool
	}{{"", "", true}, {"/sandboxes/" + created.ID, "/sandboxes/{id}", false}} {
		t.Run("prefix="+prefix.pattern, func(t *testing.T) {
			st := state{}
			for _, sp := range proxySteps(up.port, prefix.fail) {
				key := sp.method + " " + sp.path
				covered[key] = true
				if _, ok := ops[key]; !ok {
					t.Errorf("AIO has no operation %s", key)
					continue
				}
				if !s.routes[sp.method+" "+prefix.pattern+sp.path] {
					t.Errorf("%s is not served at %q", key, prefix.pattern)
					continue
				}
				runStep(t, s, v, prefix.url, sp, st)
			}
			invalidBodies(t, s, v, ops, struct{ url, pattern string }{prefix.url, prefix.pattern})
		})
	}
	var missing []string
	for key := range ops {
		if !covered[key] {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	for _, key := range missing {
		t.Errorf("%s is not called by the proxy conformance steps", key)
	}

	// What the default sandbox (mode none) is told.
	r := s.c.Do("GET", "/v1/proxy/health", nil)
	if r.Success || !strings.Contains(r.Message, "network mode none") {
		t.Errorf("mode none: %s", r.Raw)
	}
}

// startProxyServer is startServer with port 3000 among the ports the
// server reaches inside sandboxes (a zero config has none; the real
// default lists 3000), for mappings to a sandbox's own dev server.
func startProxyServer(t *testing.T) *server {
	t.Helper()
	d := daemontest.Start(t, func(c *config.Config) { c.PreviewPorts = []uint16{3000} })
	c := daemontest.NewClient(t, d)
	c.HTTP = &http.Client{Timeout: 2 * time.Minute}
	s := &server{t: t, base: c.Base, key: c.Key, routes: map[string]bool{}, c: c}
	err := chi.Walk(d.API().Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		s.routes[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatalf("walk routes: %v", err)
	}
	return s
}

// TestAIOProxyUpstreamCarriesCurl: an upstream set over PUT
// /sandboxes/{id}/v1/proxy/upstream carries a command's curl in the
// sandbox (plain HTTP in absolute form, HTTPS-style CONNECT tunnels) with
// its credentials; the answers, the audit and the event records never
// show the password.
func TestAIOProxyUpstreamCarriesCurl(t *testing.T) {
	s := startProxyServer(t)
	up := newRecordingProxy(t)
	dest, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	destSrv := &http.Server{ReadHeaderTimeout: 30 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the destination")
	})}
	go func() { _ = destSrv.Serve(dest) }()
	t.Cleanup(func() { _ = destSrv.Close() })
	destPort := dest.Addr().(*net.TCPAddr).Port

	const password = "s3cret-Pw-9f2"
	id := s.c.NewSandbox(map[string]any{"network": map[string]any{"mode": "proxy",
		"allow": []string{"localhost:" + strconv.Itoa(up.port), "localhost:" + strconv.Itoa(destPort)}}})
	base := "/sandboxes/" + id + "/v1/proxy"
	r := s.c.Do("PUT", base+"/upstream", map[string]any{"server": fmt.Sprintf("http://agent:%s@localhost:%d", password, up.port)})
	if !r.Success || strings.Contains(string(r.Raw), password) || !strings.Contains(string(r.Raw), `"password":"********"`) {
		t.Fatalf("set upstream: %s", r.Raw)
	}
	if r := s.c.Do("GET", base+"/upstream", nil); !r.Success || strings.Contains(string(r.Raw), password) {
		t.Fatalf("get upstream: %s", r.Raw)
	}
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+password))

	proxy := "-x http://127.0.0.1:3128 --noproxy ''"
	res := s.c.Exec(id, fmt.Sprintf("curl -sS %s http://localhost:%d/plain", proxy, destPort))
	if !strings.Contains(res.Stdout, fmt.Sprintf("via upstream http://localhost:%d/plain", destPort)) {
		t.Fatalf("plain HTTP did not go through the upstream: %+v", res)
	}
	res = s.c.Exec(id, fmt.Sprintf("curl -sS -p %s http://localhost:%d/tunnel", proxy, destPort))
	if !strings.Contains(res.Stdout, "hello from the destination") {
		t.Fatalf("CONNECT did not reach the destination: %+v", res)
	}
	seen := up.requests()
	want := []string{
		fmt.Sprintf("GET http://localhost:%d/plain %s", destPort, wantAuth),
		fmt.Sprintf("CONNECT localhost:%d %s", destPort, wantAuth),
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the upstream saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}

	// Excluded: direct again (the upstream sees nothing more).
	if r := s.c.Do("POST", base+"/excludes", map[string]any{"pattern": "localhost"}); !r.Success {
		t.Fatalf("add exclude: %s", r.Raw)
	}
	res = s.c.Exec(id, fmt.Sprintf("curl -sS %s http://localhost:%d/direct", proxy, destPort))
	if !strings.Contains(res.Stdout, "hello from the destination") || len(up.requests()) != 2 {
		t.Fatalf("an excluded destination: %+v, upstream saw %v", res, up.requests())
	}

	// A mapping to the sandbox's own port 3000: curl's request for
	// myapp.test reaches a server listening inside the sandbox (the
	// source is in no allow list; the upstream is not asked).
	if r := s.c.Do("POST", base+"/mappings", map[string]any{"source": "myapp.test", "target": ":3000"}); !r.Success {
		t.Fatalf("add mapping: %s", r.Raw)
	}
	res = s.c.Exec(id, "cd /tmp && echo served-inside > index.html && (python3 -m http.server 3000 --bind 127.0.0.1 >/dev/null 2>&1 &) && "+
		"for i in $(seq 100); do curl -sSf "+proxy+" http://myapp.test/index.html 2>/dev/null && break; sleep 0.1; done")
	if !strings.Contains(res.Stdout, "served-inside") || len(up.requests()) != 2 {
		t.Fatalf("a mapping into the sandbox: %+v, upstream saw %v", res, up.requests())
	}

	// The audit holds the connections with their route and the upstream's
	// address, and nowhere the password.
	audit := s.c.Do("GET", "/v1/audit?sandbox="+url.QueryEscape(id), nil)
	if audit.Status != http.StatusOK {
		t.Fatalf("audit: %d %s", audit.Status, audit.Raw)
	}
	body := string(audit.Raw)
	if strings.Contains(body, password) {
		t.Fatal("the audit records hold the upstream's password")
	}
	if !strings.Contains(body, fmt.Sprintf(`"via":"localhost:%d"`, up.port)) || !strings.Contains(body, `"route":"upstream"`) ||
		!strings.Contains(body, `"route":"sandbox-loopback"`) || !strings.Contains(body, `"mapped_from":"myapp.test:80"`) || !strings.Contains(body, "proxy.upstream.set") {
		t.Fatalf("audit lacks the routed connections or the upstream change: %s", trim(audit.Raw))
	}
}

// TestAIOProxyInHostMode: a sandbox sharing the host's network has no
// proxy to route; every operation says so as a tool-level failure.
func TestAIOProxyInHostMode(t *testing.T) {
	d := daemontest.Start(t, func(c *config.Config) { c.NetworkUnrestricted = true })
	c := daemontest.NewClient(t, d)
	id := c.NewSandbox(map[string]any{"network": map[string]any{"mode": "host"}})
	for _, call := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/proxy/upstream", nil},
		{"PUT", "/v1/proxy/upstream", map[string]any{"server": "proxy.example.com:3128"}},
		{"POST", "/v1/proxy/mappings", map[string]any{"source": "a.example", "target": ":3000"}},
		{"GET", "/v1/proxy/health", nil},
	} {
		r := c.Do(call.method, "/sandboxes/"+id+call.path, call.body)
		if r.Status != http.StatusOK || !r.Envelope || r.Success || !strings.Contains(r.Message, "network mode host") || string(r.Data) != "null" {
			t.Errorf("%s %s in mode host: %d %s", call.method, call.path, r.Status, r.Raw)
		}
	}
}
