package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/testenv"
)

// These tests start real sandboxes and talk to them only over loopback:
// host listeners on 127.0.0.1, the sandbox's own lo, and (for the "any
// address" case) 192.0.2.1, a documentation address that a sandbox's
// namespace has no route to, so nothing is ever sent.

// hostListener counts TCP connections and UDP datagrams that reach the
// host's loopback.
type hostListener struct {
	tcp     net.Listener
	udp     net.PacketConn
	tcpHits atomic.Int64
	udpHits atomic.Int64
}

func newHostListener(t *testing.T) *hostListener {
	t.Helper()
	h := &hostListener{}
	var err error
	if h.tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if h.udp, err = net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(h.port())); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := h.tcp.Accept()
			if err != nil {
				return
			}
			h.tcpHits.Add(1)
			_ = c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			if _, _, err := h.udp.ReadFrom(buf); err != nil {
				return
			}
			h.udpHits.Add(1)
		}
	}()
	t.Cleanup(func() { _ = h.tcp.Close(); _ = h.udp.Close() })
	return h
}

func (h *hostListener) port() int { return h.tcp.Addr().(*net.TCPAddr).Port }

// countingServer is an HTTP server on the host's loopback.
type countingServer struct {
	port int
	hits atomic.Int64
}

func newCountingServer(t *testing.T, name string, redirectTo *int) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingServer{port: ln.Addr().(*net.TCPAddr).Port}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		cs.hits.Add(1)
		_, _ = fmt.Fprintf(w, "hello from %s", name)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		cs.hits.Add(1)
		http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/", *redirectTo), http.StatusFound)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return cs
}

type execResult struct {
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

func (s *server) exec(key, id, command string) execResult {
	s.t.Helper()
	var res execResult
	expectOK(s.t, s.do("POST", "/v1/sandboxes/"+id+"/exec", key, map[string]any{"command": command, "timeout": 30}, nil), 200, &res)
	return res
}

func (s *server) createSandbox(key string, body map[string]any) string {
	s.t.Helper()
	var info struct {
		ID string `json:"id"`
	}
	if body == nil {
		body = map[string]any{}
	}
	expectOK(s.t, s.do("POST", "/v1/sandboxes", key, body, nil), 201, &info)
	return info.ID
}

// noneProbe tries every way out of a sandbox in network mode none and
// prints one JSON object: probe name → "OK" or the error.
const noneProbe = `
import json, socket, sys
port = int(sys.argv[1])
res = {}
def attempt(name, fn):
    try:
        fn()
        res[name] = "OK"
    except Exception as e:
        res[name] = type(e).__name__ + ": " + str(e)
def tcp(fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(2)
    try: s.connect(addr)
    finally: s.close()
def udp_to_other():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("192.0.2.1", 53))
attempt("tcp_127", lambda: tcp(socket.AF_INET, ("127.0.0.1", port)))
attempt("tcp_v6_lo", lambda: tcp(socket.AF_INET6, ("::1", port)))
attempt("tcp_other", lambda: tcp(socket.AF_INET, ("192.0.2.1", 80)))
attempt("udp_other", udp_to_other)
attempt("raw_icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("raw_tcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
attempt("packet_dgram", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM))
attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
# UDP to the loopback stays inside the sandbox's own lo: it "works" but
# must never reach the host's listener (checked by the test).
def udp_lo():
    for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.sendto(b"x", (addr, port))
attempt("udp_lo_sent", udp_lo)
print(json.dumps(res))
`

func TestNetworkNoneNothingLeaves(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0 })
	host := newHostListener(t)
	id := s.createSandbox(s.d.AdminKey(), map[string]any{"name": "closed"})
	res := s.exec(s.d.AdminKey(), id, fmt.Sprintf("/usr/bin/python3 -c %s %d", shq(noneProbe), host.port()))
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("probe failed: %+v", res)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
		t.Fatalf("probe output %q: %v", res.Stdout, err)
	}
	for _, name := range []string{"tcp_127", "tcp_v6_lo", "tcp_other", "udp_other", "raw_icmp", "raw_tcp", "packet", "packet_dgram", "dns"} {
		v, ok := got[name]
		if !ok || v == "OK" {
			t.Errorf("%s: %q, want a failure", name, v)
		} else {
			t.Logf("%s: %s", name, v)
		}
	}
	// Give a stray datagram time to arrive before counting.
	time.Sleep(100 * time.Millisecond)
	if n := host.tcpHits.Load() + host.udpHits.Load(); n != 0 {
		t.Fatalf("the host's loopback listener saw %d connections/datagrams from a none sandbox", n)
	}
	env := s.exec(s.d.AdminKey(), id, "env")
	if strings.Contains(env.Stdout, "PROXY") {
		t.Fatalf("a none sandbox got proxy variables: %s", env.Stdout)
	}
	var sec struct {
		Network struct {
			Modes []string `json:"modes_available"`
		} `json:"network"`
		Sandboxes []struct {
			ID      string                `json:"id"`
			Network struct{ Mode string } `json:"network"`
		} `json:"sandboxes"`
	}
	expectOK(t, s.do("GET", "/v1/sandbox/security", s.d.AdminKey(), nil, nil), 200, &sec)
	found := false
	for _, row := range sec.Sandboxes {
		if row.ID == id {
			found = row.Network.Mode == "none"
		}
	}
	if !found || strings.Join(sec.Network.Modes, ",") != "none,proxy" {
		t.Fatalf("security report: %+v", sec)
	}
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// rawProbe speaks to the sandbox's proxy directly and prints the status
// line of its answer.
const rawProbe = `
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(sys.argv[1].encode().replace(b"|", b"\r\n"))
print(s.recv(4096).split(b"\r\n")[0].decode())
`

func TestNetworkProxy(t *testing.T) {
	t.Parallel() // its own server, data dir and cgroup base; nothing shared
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0; c.DisableRateLimit = true })
	var portB int
	a := newCountingServer(t, "A", &portB)
	b := newCountingServer(t, "B", &portB)
	portB = b.port
	admin := s.d.AdminKey()
	agent := s.createKey("agent", "agent")

	// Who may ask for what.
	priv := map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{fmt.Sprintf("localhost:%d", a.port)}}}
	expectError(t, s.do("POST", "/v1/sandboxes", agent.Key, priv, nil), 403, "forbidden")
	expectError(t, s.do("POST", "/v1/sandboxes", agent.Key, map[string]any{"network": map[string]any{"mode": "host"}}, nil), 403, "forbidden")
	expectError(t, s.do("POST", "/v1/sandboxes", admin, map[string]any{"network": map[string]any{"mode": "host"}}, nil), 403, "forbidden")
	expectError(t, s.do("POST", "/v1/sandboxes", agent.Key, map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"bad host!"}}}, nil), 400, "invalid")
	s.createSandbox(agent.Key, map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"allowed.example", "*.pypi.org:443"}}})

	id := s.createSandbox(admin, map[string]any{"network": map[string]any{"mode": "proxy",
		"allow": []string{fmt.Sprintf("localhost:%d", a.port), "allowed.example"}}})
	proxy := "-x http://127.0.0.1:3128 --noproxy ''"
	run := func(cmd string) execResult {
		r := s.exec(admin, id, cmd)
		t.Logf("$ %s\n%s%s", cmd, r.Stdout, r.Stderr)
		return r
	}

	env := run("env | grep -i proxy | sort")
	for _, want := range []string{"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128", "NO_PROXY=localhost,127.0.0.1,::1"} {
		if !strings.Contains(env.Stdout, want) {
			t.Fatalf("environment lacks %s:\n%s", want, env.Stdout)
		}
	}

	cases := []struct {
		name, cmd, want string
	}{
		{"plain HTTP to the allowed port", fmt.Sprintf("curl -sS %s http://localhost:%d/", proxy, a.port), "hello from A"},
		{"CONNECT to the allowed port", fmt.Sprintf("curl -sS -p %s http://localhost:%d/", proxy, a.port), "hello from A"},
		{"python through HTTP_PROXY", fmt.Sprintf(`NO_PROXY= no_proxy= /usr/bin/python3 -c "import urllib.request as u; print(u.urlopen('http://localhost:%d/').read().decode())"`, a.port), "hello from A"},
		{"other port refused", fmt.Sprintf("curl -sS %s -w ' %%{http_code}' http://localhost:%d/", proxy, b.port), "sandhold egress proxy: \"localhost:" + strconv.Itoa(b.port) + "\" denied"},
		{"other port refused (CONNECT)", fmt.Sprintf("curl -sS -p %s http://localhost:%d/ 2>&1; echo rc=$?", proxy, b.port), "403"},
		{"IP literal refused (CONNECT)", fmt.Sprintf("curl -sS -p %s http://127.0.0.1:%d/ 2>&1; echo rc=$?", proxy, a.port), "403"},
		{"IP literal refused (HTTP)", fmt.Sprintf("curl -sS %s http://127.0.0.1:%d/", proxy, a.port), "IP addresses are reachable only when listed"},
		{"suffix trick refused", fmt.Sprintf("curl -sS %s -w ' %%{http_code}' http://allowed.example.evil.test/", proxy), "403"},
		{"localhost suffix refused", fmt.Sprintf("curl -sS %s -w ' %%{http_code}' http://localhost.evil.test:%d/", proxy, a.port), "403"},
		{"Host header disagreeing with CONNECT", fmt.Sprintf("/usr/bin/python3 -c %s 'CONNECT localhost:%d HTTP/1.1|Host: evil.test:%d||'", shq(rawProbe), a.port, a.port), "HTTP/1.1 4"},
		{"Host header disagreeing with the URL", fmt.Sprintf("/usr/bin/python3 -c %s 'GET http://localhost:%d/ HTTP/1.1|Host: localhost:%d||'", shq(rawProbe), a.port, b.port), "HTTP/1.1 4"},
		{"redirect relayed, not followed", fmt.Sprintf("curl -sS %s -o /dev/null -w '%%{http_code} %%{redirect_url}' http://localhost:%d/redirect", proxy, a.port), fmt.Sprintf("302 http://localhost:%d/", b.port)},
		{"followed redirect refused", fmt.Sprintf("curl -sS -L %s -w ' %%{http_code}' http://localhost:%d/redirect", proxy, a.port), "403"},
		{"direct connect bypassing the proxy", fmt.Sprintf("curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:%d/ 2>&1; echo rc=$?", a.port), "rc=7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.cmd)
			if out := r.Stdout + r.Stderr; !strings.Contains(out, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, out)
			}
		})
	}
	if a.hits.Load() == 0 {
		t.Fatal("the allowed server saw no request")
	}
	if n := b.hits.Load(); n != 0 {
		t.Fatalf("the denied server saw %d requests", n)
	}

	// The allow list changes live; privileged entries stay admin only.
	expectError(t, s.do("PUT", "/v1/sandboxes/"+id+"/network", agent.Key, map[string]any{"allow": []string{"allowed.example"}}, nil), 404, "not_found")
	agentSB := s.createSandbox(agent.Key, map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"allowed.example"}}})
	expectError(t, s.do("PUT", "/v1/sandboxes/"+agentSB+"/network", agent.Key, map[string]any{"allow": []string{fmt.Sprintf("localhost:%d", b.port)}}, nil), 403, "forbidden")
	expectOK(t, s.do("PUT", "/v1/sandboxes/"+id+"/network", admin, map[string]any{"allow": []string{fmt.Sprintf("localhost:%d", a.port), fmt.Sprintf("localhost:%d", b.port)}}, nil), 200, nil)
	if r := run(fmt.Sprintf("curl -sS %s http://localhost:%d/", proxy, b.port)); !strings.Contains(r.Stdout, "hello from B") {
		t.Fatalf("after the update B is still refused: %+v", r)
	}

	// Every attempt is audited, and counted.
	var page struct {
		Records []struct {
			Action, Verdict, Sandbox, Target string
			Detail                           map[string]any
		} `json:"records"`
	}
	expectOK(t, s.do("GET", "/v1/audit?action=network&sandbox="+id, admin, nil, nil), 200, &page)
	verdicts := map[string]int{}
	var bytesDown float64
	for _, r := range page.Records {
		verdicts[r.Action+"/"+r.Verdict]++
		if r.Action == "network.connect" {
			if d, ok := r.Detail["bytes_down"].(float64); ok {
				bytesDown += d
			}
		}
	}
	if verdicts["network.connect/allow"] == 0 || verdicts["network.connect/deny"] < 6 || verdicts["network.update/allowed"] != 1 || bytesDown == 0 {
		t.Fatalf("audit: %v (bytes down %v)", verdicts, bytesDown)
	}
	// The owner (here: an agent) sees its own sandboxes' connections.
	var own struct {
		Records []struct{ Action, Actor, Verdict string } `json:"records"`
	}
	expectOK(t, s.do("GET", "/v1/audit?action=network.connect&sandbox="+agentSB, agent.Key, nil, nil), 200, &own)
	if run := s.exec(agent.Key, agentSB, "curl -sS -o /dev/null http://denied.example/; true"); run.Status != "completed" {
		t.Fatalf("agent exec: %+v", run)
	}
	expectOK(t, s.do("GET", "/v1/audit?action=network.connect&sandbox="+agentSB, agent.Key, nil, nil), 200, &own)
	if len(own.Records) != 1 || own.Records[0].Actor != agent.ID || own.Records[0].Verdict != "deny" {
		t.Fatalf("agent's view of its sandbox's connections: %+v", own.Records)
	}
	var stats []struct {
		ID      string `json:"id"`
		Network struct {
			BytesDown int64 `json:"bytes_down"`
			Denied    int64 `json:"connections_denied"`
		} `json:"network"`
	}
	expectOK(t, s.do("GET", "/v1/sandbox/resources", admin, nil, nil), 200, &stats)
	ok := false
	for _, st := range stats {
		if st.ID == id {
			ok = st.Network.BytesDown > 0 && st.Network.Denied > 0
		}
	}
	if !ok {
		t.Fatalf("resources lack network bytes: %+v", stats)
	}
	m := s.do("GET", "/metrics", admin, nil, nil)
	for _, want := range []string{`sandhold_egress_connections_total{verdict="allowed"}`, `sandhold_egress_connections_total{verdict="denied"}`,
		`sandhold_sandboxes{state="running"}`, `sandhold_sandbox_executions_total{status="completed"}`, `sandhold_egress_bytes_total{direction="down"}`} {
		if !strings.Contains(string(m.raw), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}

	// A mode change restarts the init, and only when asked to.
	expectError(t, s.do("PUT", "/v1/sandboxes/"+id+"/network", admin, map[string]any{"mode": "none", "allow": []string{}}, nil), 409, "conflict")
	expectOK(t, s.do("PUT", "/v1/sandboxes/"+id+"/network", admin, map[string]any{"mode": "none", "allow": []string{}, "restart": true}, nil), 200, nil)
	if r := run("env; curl -sS -x http://127.0.0.1:3128 --max-time 5 http://localhost:1/ 2>&1; echo rc=$?"); strings.Contains(r.Stdout, "PROXY") || !strings.Contains(r.Stdout, "rc=7") {
		t.Fatalf("after the switch to none: %+v", r)
	}
}

func TestNetworkHostModeWhenUnrestricted(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0; c.NetworkUnrestricted = true })
	host := newHostListener(t)
	agent := s.createKey("agent", "agent")
	expectError(t, s.do("POST", "/v1/sandboxes", agent.Key, map[string]any{"network": map[string]any{"mode": "host"}}, nil), 403, "forbidden")
	id := s.createSandbox(s.d.AdminKey(), map[string]any{"network": map[string]any{"mode": "host"}})
	r := s.exec(s.d.AdminKey(), id, fmt.Sprintf(`/usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', %d), timeout=5).close(); print('connected')"`, host.port()))
	if !strings.Contains(r.Stdout, "connected") || host.tcpHits.Load() != 1 {
		t.Fatalf("host mode did not reach the host's loopback: %+v (hits %d)", r, host.tcpHits.Load())
	}
	var sec struct {
		Network struct {
			HostAllowed   bool     `json:"host_mode_allowed"`
			HostSandboxes []string `json:"host_mode_sandboxes"`
		} `json:"network"`
	}
	expectOK(t, s.do("GET", "/v1/sandbox/security", s.d.AdminKey(), nil, nil), 200, &sec)
	if !sec.Network.HostAllowed || len(sec.Network.HostSandboxes) != 1 || sec.Network.HostSandboxes[0] != id {
		t.Fatalf("security report: %+v", sec)
	}
}

func TestRateLimitAnswers429(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0; c.MaxSandboxesPerKey = 2 })
	agent := s.createKey("agent", "agent")
	id := s.createSandbox(agent.Key, nil)
	// Code execution: 10 per minute with a burst of 10. The 429 keeps its
	// status on the AIO route; the body is the code routes' envelope
	// (data null).
	code := "/sandboxes/" + id + "/v1/code/execute"
	for i := range 10 {
		if r := s.do("POST", code, agent.Key, map[string]any{"language": "bash", "code": "true"}, nil); r.status != 200 || r.env.Success == nil || !*r.env.Success {
			t.Fatalf("code %d: %d %s", i, r.status, r.raw)
		}
	}
	r := s.do("POST", code, agent.Key, map[string]any{"language": "bash", "code": "true"}, nil)
	if r.status != 429 || r.env.Success == nil || *r.env.Success || r.env.Message == nil || *r.env.Message == "" ||
		!strings.HasPrefix(r.header.Get("X-Request-Id"), "req_") {
		t.Fatalf("11th code execution: %d %s, want 429", r.status, r.raw)
	}
	checkLimitHeaders(t, r, "10")
	// Commands count apart (exec.run, shell.*, bash.*), in one bucket
	// with a burst of 60 that the code limit above does not touch.
	r = s.do("POST", "/v1/sandboxes/"+id+"/exec", agent.Key, map[string]any{"command": "true"}, nil)
	// Remaining is 59, or 60 if a token refilled before the header.
	if rem, err := strconv.Atoi(r.header.Get("X-RateLimit-Remaining")); r.status != 200 || r.header.Get("X-RateLimit-Limit") != "60" || err != nil || rem < 59 {
		t.Fatalf("exec after the code limit: %d %v %s", r.status, r.header, r.raw)
	}
	// Cheap bash commands (async, in one session the first call starts)
	// drain the same bucket. It refills at
	// 300/min, so the count is the burst left plus what refilled
	// meanwhile: at least 59.
	n := 0
	for ; n < 600; n++ {
		r = s.do("POST", "/sandboxes/"+id+"/v1/bash/exec", agent.Key, map[string]any{"session_id": "drain", "command": "true", "async_mode": true}, nil)
		if r.status != 200 {
			break
		}
	}
	if n < 59 {
		t.Fatalf("command bucket refused after %d calls: %d %s", n, r.status, r.raw)
	}
	expectError(t, r, 429, "rate_limited")
	checkLimitHeaders(t, r, "60")
	// The sandbox cap answers the same way.
	s.createSandbox(agent.Key, nil)
	r = s.do("POST", "/v1/sandboxes", agent.Key, map[string]any{}, nil)
	expectError(t, r, 429, "rate_limited")
	checkLimitHeaders(t, r, "2")

	// The audit filter takes an action by dotted prefix, and a category
	// ("exec": every way code ran) across its prefixes.
	s.do("GET", "/v1/sandboxes", "shk_not-a-key", nil, nil)
	for _, tc := range []struct {
		filter   string
		prefixes []string
		want     []string
	}{
		{"auth", []string{"auth.", "authz."}, []string{"auth.failure"}},
		{"exec", []string{"exec.", "shell.", "bash.", "code.", "jupyter."}, []string{"exec.run", "code.execute", "bash.exec"}},
		{"code", []string{"code."}, []string{"code.execute"}},
		{"sandbox", []string{"sandbox."}, []string{"sandbox.create"}},
	} {
		var page struct {
			Records []struct{ Action, Verdict string } `json:"records"`
		}
		expectOK(t, s.do("GET", "/v1/audit?action="+tc.filter, s.d.AdminKey(), nil, nil), 200, &page)
		seen := map[string]bool{}
		for _, r := range page.Records {
			if !slices.ContainsFunc(tc.prefixes, func(p string) bool { return strings.HasPrefix(r.Action, p) }) {
				t.Fatalf("?action=%s returned %s", tc.filter, r.Action)
			}
			seen[r.Action] = true
		}
		for _, w := range tc.want {
			if !seen[w] {
				t.Fatalf("?action=%s: no %s among %d records", tc.filter, w, len(page.Records))
			}
		}
	}
	m := s.do("GET", "/metrics", s.d.AdminKey(), nil, nil)
	for _, want := range []string{`sandhold_ratelimit_refusals_total{category="code"} 1`, `sandhold_ratelimit_refusals_total{category="command"} 1`,
		`sandhold_ratelimit_refusals_total{category="sandboxes"} 1`} {
		if !strings.Contains(string(m.raw), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	var sec struct {
		RateLimits struct {
			Enabled bool `json:"enabled"`
			Rules   []struct {
				Category  string  `json:"category"`
				PerMinute float64 `json:"per_minute"`
			} `json:"rules"`
		} `json:"rate_limits"`
		Caps struct {
			MaxPerKey int `json:"max_sandboxes_per_key"`
			MaxExecs  int `json:"max_executions_per_sandbox"`
		} `json:"caps"`
	}
	expectOK(t, s.do("GET", "/v1/sandbox/security", agent.Key, nil, nil), 200, &sec)
	if !sec.RateLimits.Enabled || len(sec.RateLimits.Rules) == 0 || sec.Caps.MaxPerKey != 2 || sec.Caps.MaxExecs == 0 {
		t.Fatalf("security report: %+v", sec)
	}
}

func checkLimitHeaders(t *testing.T, r resp, limit string) {
	t.Helper()
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	reset, rerr := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || ra < 1 || r.header.Get("X-RateLimit-Limit") != limit || r.header.Get("X-RateLimit-Remaining") != "0" ||
		rerr != nil || reset < time.Now().Unix() {
		t.Fatalf("429 headers: %v", r.header)
	}
}

func TestExecutionCapAnswers429(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0; c.DisableRateLimit = true })
	admin := s.d.AdminKey()
	id := s.createSandbox(admin, nil)
	var ids []string
	for {
		r := s.do("POST", "/v1/sandboxes/"+id+"/exec", admin, map[string]any{"command": "sleep 30", "background": true}, nil)
		if r.status == 429 {
			expectError(t, r, 429, "rate_limited")
			checkLimitHeaders(t, r, strconv.Itoa(len(ids)))
			break
		}
		var res struct {
			ID string `json:"command_id"`
		}
		expectOK(t, r, 200, &res)
		ids = append(ids, res.ID)
		if len(ids) > 64 {
			t.Fatal("no cap on concurrent executions")
		}
	}
	for _, cid := range ids {
		s.do("POST", "/v1/sandboxes/"+id+"/exec/"+cid+"/kill", admin, nil, nil)
	}
}

// TestHammerDoesNotGrowMemory sends 10,000 requests that the limiter
// refuses and checks that the server's heap does not grow with them.
func TestHammerDoesNotGrowMemory(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0 })
	agent := s.createKey("agent", "agent")
	id := s.createSandbox(agent.Key, nil)
	body := `{"command":"true"}`
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	hammer := func(n int) map[int]int {
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		const workers = 8
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					req, _ := http.NewRequest("POST", s.base+"/v1/sandboxes/"+id+"/exec", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+agent.Key)
					req.Header.Set("Content-Type", "application/json")
					res, err := client.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					_ = res.Body.Close()
					mu.Lock()
					codes[res.StatusCode]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return codes
	}
	hammer(500) // warm up: buffers, pools, prepared statements
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	codes := hammer(10_000)
	elapsed := time.Since(t0)
	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	t.Logf("10,000 requests in %v: %v; heap %d → %d bytes (%+.0f); goroutines %d; limiter buckets %d",
		elapsed.Round(time.Millisecond), codes, before.HeapAlloc, after.HeapAlloc, growth, runtime.NumGoroutine(), s.d.Limiter().Tracked())
	// The bucket refills while the hammer runs, and how long it runs
	// depends on the machine's load: the limiter may let through at most
	// its burst plus what the rule refills in that time, never more.
	rule := ratelimit.DefaultRules()[ratelimit.Command]
	allowed := rule.Burst + int(math.Ceil(rule.PerMinute*elapsed.Minutes())) + 1
	if codes[200] > allowed || codes[200]+codes[429] != 10_000 {
		t.Fatalf("codes %v: the limiter may allow at most %d in %v", codes, allowed, elapsed)
	}
	// Each request leaves an audit row in SQLite (on disk, not the heap);
	// what must not happen is per-request state kept in memory.
	if growth > 8<<20 {
		t.Fatalf("heap grew by %.0f bytes over 10,000 requests", growth)
	}
}

// TestProxyConnectionFlood opens far more connections to the proxy than
// the server serves at once, then checks the sandbox is still usable and
// measures how fast refused requests are audited.
func TestProxyConnectionFlood(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0; c.DisableRateLimit = true })
	admin := s.d.AdminKey()
	id := s.createSandbox(admin, map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"allowed.example"}}})
	// 200 idle connections held open: the server serves 64 at once
	// (egress.DefaultMaxConnsPerSandbox) and answers the rest 429.
	const flood = `
import socket, time
socks, codes = [], {}
for i in range(200):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    socks.append(s)
time.sleep(1)
for s in socks:
    s.setblocking(False)
    try:
        line = s.recv(64).split(b"\r\n")[0].decode()
    except BlockingIOError:
        line = "open"
    codes[line] = codes.get(line, 0) + 1
print(codes)
`
	r := s.exec(admin, id, "/usr/bin/python3 -c "+shq(flood))
	t.Logf("200 held connections: %s%s", r.Stdout, r.Stderr)
	if !strings.Contains(r.Stdout, "'open': 64") || !strings.Contains(r.Stdout, "'HTTP/1.1 429 Too Many Requests': 136") {
		t.Fatalf("want 64 open and 136 refused: %+v", r)
	}
	// Refused requests, one connection each, as fast as a client can.
	const refused = `
import socket, time
t0 = time.time()
for i in range(500):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"GET http://denied.example/ HTTP/1.1\r\nHost: denied.example\r\n\r\n")
    assert s.recv(64).startswith(b"HTTP/1.1 403"), "not refused"
    s.close()
print("%.1f" % ((time.time() - t0) * 1000))
`
	r = s.exec(admin, id, "/usr/bin/python3 -c "+shq(refused))
	ms, err := strconv.ParseFloat(strings.TrimSpace(r.Stdout), 64)
	if err != nil {
		t.Fatalf("refused loop: %+v", r)
	}
	t.Logf("500 refused proxy requests in %.0f ms (%.2f ms each, audit record included)", ms, ms/500)
	if got := s.exec(admin, id, "echo alive"); got.Stdout != "alive\n" {
		t.Fatalf("sandbox unusable after the flood: %+v", got)
	}
}

// TestProxyPolicySurvivesRestart: a proxy sandbox's allow list is part of
// its record; a restarted server installs it again before serving.
func TestProxyPolicySurvivesRestart(t *testing.T) {
	testenv.RequireSandboxes(t)
	dir := t.TempDir()
	var none int
	a := newCountingServer(t, "A", &none)
	s := start(t, dir, func(c *config.Config) { c.WarmPool = 0; c.DisableRateLimit = true })
	id := s.createSandbox(s.d.AdminKey(), map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{fmt.Sprintf("localhost:%d", a.port)}}})
	s.stop()

	s2 := start(t, dir, func(c *config.Config) { c.WarmPool = 0; c.DisableRateLimit = true })
	r := s2.exec(s2.d.AdminKey(), id, fmt.Sprintf("curl -sS -x http://127.0.0.1:3128 --noproxy '' http://localhost:%d/", a.port))
	if r.Stdout != "hello from A" {
		t.Fatalf("after a restart: %+v", r)
	}
}
