package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// serveForTest runs a daemon in this (child) process until it is killed.
// The restart test starts it as "serve-test" so it can kill -9 it.
func serveForTest() int {
	cfg := config.Default()
	cfg.DataDir = os.Getenv("SANDHOLD_TEST_DATA_DIR")
	cfg.Listen = "127.0.0.1:0"
	cfg.APIKey = os.Getenv("SANDHOLD_TEST_KEY")
	cfg.WarmPool = 1
	cfg.DisableRateLimit = true
	cfg.DiskBudget = 1 << 40 // not a share of a shared host's free space
	d, err := New(cfg, WithStderr(io.Discard), WithLogger(NewLogger(io.Discard, "error")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve-test:", err)
		return 1
	}
	go func() {
		<-d.Ready()
		_ = os.WriteFile(filepath.Join(cfg.DataDir, "addr"), []byte(d.Addr()), 0o600)
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "serve-test:", err)
		return 1
	}
	return 0
}

type child struct {
	cmd  *osexec.Cmd
	base string
	key  string
}

func startChild(t *testing.T, dir, key string) *child {
	t.Helper()
	_ = os.Remove(filepath.Join(dir, "addr"))
	cmd := osexec.Command("/proc/self/exe", "serve-test")
	cmd.Env = append(os.Environ(), "SANDHOLD_TEST_DATA_DIR="+dir, "SANDHOLD_TEST_KEY="+key)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if b, err := os.ReadFile(filepath.Join(dir, "addr")); err == nil && len(b) > 0 {
			return &child{cmd: cmd, base: "http://" + string(b), key: key}
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	t.Fatal("test server did not come up")
	return nil
}

func (c *child) call(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var env map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, env)
	}
	return env
}

// initsOf returns the host pids of sandbox inits whose cgroup is below base.
func initsOf(base string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(cmdline, []byte("sandhold-init\x00init")) {
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if strings.Contains(string(cg), "/"+base+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procsBelow lists every process in the server's sandbox groups. It is
// called only while no server runs on base: cgroup.New makes the base again
// when the server's clean stop has removed it, so the base goes again once
// read (Release removes it only when empty) — without that, each run of the
// suite left one empty base group in every hierarchy.
func procsBelow(t *testing.T, base string) (groups []string, procs int) {
	m, err := cgroup.New(base)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	names, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		g, err := m.Open(n)
		if err != nil {
			continue
		}
		ps, _ := g.Procs()
		procs += len(ps)
	}
	return names, procs
}

func TestKill9LeavesNothingUnaccountedFor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes need root; run the tests as root")
	}
	dir := t.TempDir()
	key := "shk_" + strings.Repeat("r", 43)
	base := cgroupBase(dir)
	mountsBefore, _ := os.ReadFile("/proc/self/mountinfo")

	c := startChild(t, dir, key)
	sb := c.call(t, "POST", "/v1/sandboxes", map[string]any{})["data"].(map[string]any)["id"].(string)
	c.call(t, "POST", "/v1/sandboxes/"+sb+"/exec", map[string]any{"command": "echo kept > /workspace/f"})
	c.call(t, "POST", "/v1/sandboxes/"+sb+"/exec", map[string]any{"command": "setsid sleep 1000 & sleep 1000", "background": true})
	// The pool refills in the background after the create took its
	// sandbox: wait (bounded) until its new init runs too.
	for deadline := time.Now().Add(30 * time.Second); len(initsOf(base)) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d inits running before the kill, want the sandbox's and the pool's", len(initsOf(base)))
		}
	}

	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	// The inits die with the server (parent-death signal) and take their
	// pid namespaces along.
	deadline := time.Now().Add(10 * time.Second)
	for len(initsOf(base)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("inits survived the server: %v", initsOf(base))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The kernel kills the rest of each pid namespace when its init
	// dies; give it the same bounded time.
	for {
		_, procs := procsBelow(t, base)
		if procs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes left in the sandbox groups after kill -9", procs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every mount lived in a sandbox's own mount namespace.
	mountsAfter, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Count(string(mountsAfter), "\n") != strings.Count(string(mountsBefore), "\n") || strings.Contains(string(mountsAfter), dir) {
		t.Fatalf("host mount table changed:\n%s", mountsAfter)
	}

	// The restarted server reaps the old groups, keeps the record and the
	// workspace, and starts the sandbox again on use.
	c = startChild(t, dir, key)
	defer func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		_ = c.cmd.Wait()
		groups, procs := procsBelow(t, base)
		if len(groups) != 0 || procs != 0 {
			t.Errorf("after a clean stop: groups %v, %d processes", groups, procs)
		}
	}()
	info := c.call(t, "GET", "/v1/sandboxes/"+sb, nil)["data"].(map[string]any)
	if info["state"] != "stopped" {
		t.Fatalf("state after restart %v, want stopped", info["state"])
	}
	res := c.call(t, "POST", "/v1/sandboxes/"+sb+"/exec", map[string]any{"command": "cat /workspace/f; pgrep -c sleep || true"})["data"].(map[string]any)
	if res["stdout"] != "kept\n0\n" {
		t.Fatalf("after restart stdout %q, want the kept file and no old sleepers", res["stdout"])
	}
}
