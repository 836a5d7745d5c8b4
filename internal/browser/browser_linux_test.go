package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/testenv"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

type memRecords struct {
	mu   sync.Mutex
	recs map[string]sandbox.Record
}

func (r *memRecords) PutSandbox(_ context.Context, rec sandbox.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recs == nil {
		r.recs = map[string]sandbox.Record{}
	}
	r.recs[rec.ID] = rec
	return nil
}

func (r *memRecords) DeleteSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.recs, id)
	return nil
}

func (r *memRecords) ListSandboxes(context.Context) ([]sandbox.Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sandbox.Record
	for _, v := range r.recs {
		out = append(out, v)
	}
	return out, nil
}

// requireBrowser skips unless this host can run sandboxes and has
// Chromium; a probe start in a child process tells a host where Chromium
// itself cannot run.
func requireBrowser(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "starts Chromium in a sandbox")
	if os.Geteuid() != 0 {
		t.Skip("sandboxes need root (id mappings and cgroups); run the tests as root")
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("user namespaces are not available:", err)
	}
	if err := Available(); err != nil {
		t.Skip(err)
	}
	probe.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, chromiumPath, "--headless=new", "--no-sandbox", "--disable-gpu", "--dump-dom", "about:blank").CombinedOutput()
		if err != nil {
			probe.err = fmt.Errorf("chromium cannot run on this host: %w: %.300s", err, out)
		}
	})
	if probe.err != nil {
		t.Skip(probe.err)
	}
}

// testSeq names each test's cgroup base (manager.New reaps below it).
var testSeq atomic.Int64

var probe struct {
	once sync.Once
	err  error
}

var (
	ownerA = auth.Caller{KeyID: "key-a", Role: auth.RoleAgent}
	ownerB = auth.Caller{KeyID: "key-b", Role: auth.RoleAgent}
)

func newManagers(t *testing.T, pids int64) (*sandbox.Manager, *Manager) {
	t.Helper()
	requireBrowser(t)
	return newManagersWith(t, pids, 512)
}

// newManagersWith is newManagers without the Chromium requirement: the
// default pids limit and the server's maximum.
func newManagersWith(t *testing.T, pids, maxPids int64) (*sandbox.Manager, *Manager) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sandboxes need root (id mappings and cgroups); run the tests as root")
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("user namespaces are not available:", err)
	}
	cg, err := cgroup.New(fmt.Sprintf("bt%d-%d", os.Getpid(), testSeq.Add(1)))
	if err != nil {
		t.Skip("cgroups unavailable:", err)
	}
	t.Cleanup(cg.Release) // after the manager's Close (cleanups run last first)
	cfg := sandbox.Config{
		DataDir:       t.TempDir(),
		Max:           sandbox.Limits{MemoryBytes: 2 << 30, CPUMilli: 2000, Pids: maxPids, DiskBytes: 1 << 30, CPUTime: 30 * time.Second},
		Default:       sandbox.Limits{MemoryBytes: 1 << 30, CPUMilli: 2000, Pids: pids, DiskBytes: 512 << 20, CPUTime: 30 * time.Second},
		TmpBytes:      256 << 20,
		InitExe:       "/proc/self/exe",
		InitArgs:      []string{"init"},
		LoopbackPorts: sandbox.LoopbackPorts([]uint16{8000}),
	}
	sm, err := sandbox.New(context.Background(), cfg, &memRecords{}, nil, cg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sm.Close)
	bm := New(sm, Config{StartTimeout: 90 * time.Second})
	t.Cleanup(bm.Close)
	return sm, bm
}

func newSandbox(t *testing.T, sm *sandbox.Manager, c auth.Caller) string {
	t.Helper()
	info, err := sm.Create(context.Background(), sandbox.CallerOf(c), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

// devToolsGet sends one HTTP GET over a DevTools connection.
func devToolsGet(t *testing.T, bm *Manager, c auth.Caller, id, path string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	conn, err := bm.DevTools(ctx, c, id)
	if err != nil {
		t.Fatalf("DevTools: %v", err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDevToolsStartsTheBrowserInsideTheSandbox(t *testing.T) {
	for _, tc := range []struct {
		name string
		pids int64
		mode string
	}{
		{"multi-process", 256, "multi-process"},
		// Below browserPids the browser brings its allowance and still
		// runs as a tree of processes (--single-process closed itself on
		// a second browser context).
		{"multi-process within the default pids", 50, "multi-process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm, bm := newManagers(t, tc.pids)
			id := newSandbox(t, sm, ownerA)
			v := devToolsGet(t, bm, ownerA, id, "/json/version")
			if ws, _ := v["webSocketDebuggerUrl"].(string); !strings.HasPrefix(ws, "ws://127.0.0.1") {
				t.Fatalf("version answer %v", v)
			}
			st, err := bm.Status(context.Background(), ownerA, id)
			if err != nil || !st.Running || st.Mode != tc.mode || !strings.HasPrefix(st.Version, "Chrome/") {
				t.Fatalf("status %+v, %v", st, err)
			}
			// The browser is processes of the sandbox, as the sandbox
			// user: its own ps sees them, more than one.
			ex, err := mustSandbox(t, sm, id).Exec(context.Background(), sandbox.ExecRequest{Command: "ps -eo user,comm | grep -c chromium"})
			if err != nil {
				t.Fatal(err)
			}
			<-ex.Done()
			if r := ex.Result(); strings.TrimSpace(r.Stdout) == "0" || strings.TrimSpace(r.Stdout) == "1" {
				t.Fatalf("not a tree of chromium processes in the sandbox's process list: %+v", r)
			}
			// Another key sees no sandbox.
			if _, err := bm.DevTools(context.Background(), ownerB, id); !fault.Is(err, fault.NotFound) {
				t.Fatalf("another key's DevTools: %v, want not found", err)
			}
		})
	}
}

func mustSandbox(t *testing.T, sm *sandbox.Manager, id string) *sandbox.Sandbox {
	t.Helper()
	s, err := sm.Get(sandbox.Caller{Admin: true}, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cdpSession is a minimal DevTools client over a relayed connection.
type cdpSession struct {
	c    *websocket.Conn
	next int
}

func openCDP(t *testing.T, bm *Manager, caller auth.Caller, id string) *cdpSession {
	t.Helper()
	v := devToolsGet(t, bm, caller, id, "/json/version")
	ws, _ := v["webSocketDebuggerUrl"].(string)
	u, err := url.Parse(ws)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return bm.DevTools(ctx, caller, id)
	}}}
	c, resp, err := websocket.Dial(ctx, "ws://127.0.0.1"+u.Path, &websocket.DialOptions{HTTPClient: hc})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("devtools websocket: %v", err)
	}
	c.SetReadLimit(32 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return &cdpSession{c: c}
}

// call sends one command (to a page session when session is set) and
// returns its result, skipping events.
func (s *cdpSession) call(t *testing.T, session, method string, params map[string]any) map[string]any {
	t.Helper()
	s.next++
	msg := map[string]any{"id": s.next, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	for {
		_, raw, err := s.c.Read(ctx)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var r struct {
			ID     int            `json:"id"`
			Result map[string]any `json:"result"`
			Error  map[string]any `json:"error"`
		}
		if json.Unmarshal(raw, &r) == nil && r.ID == s.next {
			if r.Error != nil {
				t.Fatalf("%s: %v", method, r.Error)
			}
			return r.Result
		}
	}
}

// navigate opens u in a new page and returns DevTools' error text ("" when
// the page loaded).
func (s *cdpSession) navigate(t *testing.T, u string) string {
	t.Helper()
	target := s.call(t, "", "Target.createTarget", map[string]any{"url": "about:blank"})
	sess := s.call(t, "", "Target.attachToTarget", map[string]any{"targetId": target["targetId"], "flatten": true})
	res := s.call(t, sess["sessionId"].(string), "Page.navigate", map[string]any{"url": u})
	_ = s.call(t, "", "Target.closeTarget", map[string]any{"targetId": target["targetId"]})
	e, _ := res["errorText"].(string)
	return e
}

// hostAddr is a non-loopback IPv4 address of this host, or "".
func hostAddr() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// TestBrowserHonoursNetworkModeNone: in mode none a page loads from the
// sandbox's own servers and from nowhere else (a server on the host's
// network address is unreachable).
func TestBrowserHonoursNetworkModeNone(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the test server needs /usr/bin/python3")
	}
	ip := hostAddr()
	if ip == "" {
		t.Skip("this host has no non-loopback IPv4 address to test against")
	}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	host := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "host") }), ReadHeaderTimeout: 10 * time.Second}}
	host.Start()
	defer host.Close()
	if r, err := http.Get(host.URL); err != nil {
		t.Skip("the host's own server is unreachable from the host:", err)
	} else {
		_ = r.Body.Close()
	}
	sm, bm := newManagers(t, 256)
	id := newSandbox(t, sm, ownerA)
	s := mustSandbox(t, sm, id)
	p, err := s.Spawn(context.Background(), sandbox.SpawnSpec{Argv: []string{"/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1", "8000"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	cdp := openCDP(t, bm, ownerA, id)
	own := "not tried"
	for range 20 {
		if own = cdp.navigate(t, "http://127.0.0.1:8000/"); own == "" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if own != "" {
		t.Fatalf("the sandbox's own server did not load: %s", own)
	}
	if got := cdp.navigate(t, host.URL); got == "" {
		t.Fatalf("a server on the host (%s) loaded in a mode-none sandbox", host.URL)
	} else {
		t.Logf("host server from mode none: %s", got)
	}
}

// TestBrowserStartAndIdleFigures logs a cold start's time to the first
// DevTools answer and the idle browser's memory (figures for
// BENCHMARKS.md; nothing is asserted about time).
func TestBrowserStartAndIdleFigures(t *testing.T) {
	sm, bm := newManagers(t, 256)
	id := newSandbox(t, sm, ownerA)
	s := mustSandbox(t, sm, id)
	// Start the sandbox first, so only the browser is measured.
	ex, err := s.Exec(context.Background(), sandbox.ExecRequest{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	<-ex.Done()
	begin := time.Now()
	devToolsGet(t, bm, ownerA, id, "/json/version")
	cold := time.Since(begin)
	time.Sleep(3 * time.Second)
	e := bm.entry(id)
	e.mu.Lock()
	st, err := e.run.chromium.Stats()
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold start to first DevTools answer: %v; idle browser memory (cgroup): %d MiB", cold.Round(time.Millisecond), st.MemoryBytes>>20)
}
