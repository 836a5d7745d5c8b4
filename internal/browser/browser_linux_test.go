package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox"
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
			probe.err = fmt.Errorf("chromium cannot run on this host: %v: %.300s", err, out)
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
	cg, err := cgroup.New(fmt.Sprintf("bt%d-%d", os.Getpid(), testSeq.Add(1)))
	if err != nil {
		t.Skip("cgroups unavailable:", err)
	}
	cfg := sandbox.Config{
		DataDir:       t.TempDir(),
		Max:           sandbox.Limits{MemoryBytes: 2 << 30, CPUMilli: 2000, Pids: 512, DiskBytes: 1 << 30, CPUTime: 30 * time.Second},
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
		{"single-process within the default pids", 50, "single-process"},
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
			// The browser is a process of the sandbox, as the sandbox
			// user: its own ps sees it.
			ex, err := mustSandbox(t, sm, id).Exec(context.Background(), sandbox.ExecRequest{Command: "ps -eo user,comm | grep -c chromium"})
			if err != nil {
				t.Fatal(err)
			}
			<-ex.Done()
			if r := ex.Result(); strings.TrimSpace(r.Stdout) == "0" {
				t.Fatalf("no chromium in the sandbox's process list: %+v", r)
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
