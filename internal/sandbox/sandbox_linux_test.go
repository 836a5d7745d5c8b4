package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/sandboxinit"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestMain lets the test binary serve as the sandboxes' init.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		if err := sandboxinit.Entry(); err != nil {
			fmt.Fprintln(os.Stderr, "init:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// memRecords is an in-memory Records for tests.
type memRecords struct {
	mu   sync.Mutex
	recs map[string]Record
}

func (r *memRecords) PutSandbox(_ context.Context, rec Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recs == nil {
		r.recs = map[string]Record{}
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

func (r *memRecords) ListSandboxes(context.Context) ([]Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Record
	for _, v := range r.recs {
		out = append(out, v)
	}
	return out, nil
}

func testConfig(t *testing.T) Config {
	return Config{
		DataDir:  t.TempDir(),
		Max:      Limits{MemoryBytes: 1 << 30, CPUMilli: 2000, Pids: 100, DiskBytes: 1 << 30, CPUTime: 30 * time.Second},
		Default:  Limits{MemoryBytes: 256 << 20, CPUMilli: 1000, Pids: 50, DiskBytes: 512 << 20, CPUTime: 10 * time.Second},
		TmpBytes: 32 << 20,
		InitExe:  "/proc/self/exe",
		InitArgs: []string{"init"},
	}
}

func newManager(t *testing.T, cfg Config, rec Records) *Manager {
	t.Helper()
	testenv.RequireSandboxes(t)
	// One base per test binary and test: manager.New reaps everything
	// below its base, and test binaries run in parallel.
	cg, err := cgroup.New(fmt.Sprintf("st%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")))
	if err != nil {
		t.Skip("cgroups unavailable:", err)
	}
	t.Cleanup(cg.Release) // after m.Close (cleanups run last first)
	if rec == nil {
		rec = &memRecords{}
	}
	m, err := New(context.Background(), cfg, rec, nil, cg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

var owner = Caller{KeyID: "key-a"}

func create(t *testing.T, m *Manager, spec Spec) *Sandbox {
	t.Helper()
	info, err := m.Create(context.Background(), owner, spec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Get(owner, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func run(t *testing.T, s *Sandbox, r ExecRequest) Result {
	t.Helper()
	// Inside a dispatched call: a stopped sandbox is started by one.
	e, err := s.Exec(callCtx(t, s.m), r)
	if err != nil {
		t.Fatalf("exec %q: %v", r.Command, err)
	}
	return e.Result()
}

func TestHostileCodeIsContained(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{Limits: Limits{MemoryBytes: 128 << 20, Pids: 40, CPUTime: 2 * time.Second}})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	port := ln.Addr().(*net.TCPAddr).Port
	t.Setenv("SANDHOLD_TEST_SECRET", "host-secret-value")

	// syscall numbers on x86-64 for the probes below.
	probe := func(nr int, args string) string {
		return fmt.Sprintf(`python3 -c 'import ctypes;l=ctypes.CDLL(None,use_errno=True);r=l.syscall(%d%s);print(r, ctypes.get_errno())'`, nr, args)
	}
	cases := []struct {
		name   string
		cmd    string
		status string
		reason string
		check  func(t *testing.T, r Result)
	}{
		{name: "fork bomb stops at pids.max", cmd: `bomb(){ bomb | bomb & }; bomb; sleep 1; echo survived`, status: StatusCompleted},
		{name: "usable after the fork bomb", cmd: `echo ok`, status: StatusCompleted, check: wantStdout("ok\n")},
		{name: "memory balloon is OOM-killed", cmd: `python3 -c 'b = bytearray(512 << 20); print(len(b))'`, status: StatusKilled, reason: ReasonMemory},
		{name: "infinite loop dies at its CPU limit", cmd: `while :; do :; done`, status: StatusKilled, reason: ReasonCPU},
		{name: "tmp fill stops at the tmpfs cap", cmd: `dd if=/dev/zero of=/tmp/fill bs=1M count=100 2>&1; ls -s --block-size=1M /tmp/fill`, status: StatusCompleted, check: func(t *testing.T, r Result) {
			if !strings.Contains(r.Stdout, "No space left") {
				t.Fatalf("dd did not hit the cap: %q", r.Stdout)
			}
		}},
		{name: "mount refused", cmd: probe(165, `,b"none",b"/tmp",b"tmpfs",0,0`), status: StatusCompleted, check: wantStdout("-1 1\n")},
		{name: "ptrace refused", cmd: probe(101, ",0,0,0,0"), status: StatusCompleted, check: wantStdout("-1 1\n")},
		{name: "unshare refused", cmd: probe(272, ",0x10000000"), status: StatusCompleted, check: wantStdout("-1 1\n")},
		{name: "bpf refused", cmd: probe(321, ",0,0,0"), status: StatusCompleted, check: wantStdout("-1 1\n")},
		{name: "keyctl refused", cmd: probe(250, ",0,0,0,0,0"), status: StatusCompleted, check: wantStdout("-1 1\n")},
		{name: "no host shadow", cmd: `cat /etc/shadow; echo rc=$?`, status: StatusCompleted, check: wantStdoutContains("rc=1")},
		{name: "no host root home", cmd: `ls -A /root 2>&1; echo rc=$?`, status: StatusCompleted, check: wantStdoutContains("rc=2")},
		{name: "no data dir or keys", cmd: `find / -xdev \( -name 'sandhold.db' -o -name 'admin.key' -o -name 'audit.head' \) 2>/dev/null | head; echo done`, status: StatusCompleted, check: wantStdout("done\n")},
		{name: "server environment absent", cmd: `env`, status: StatusCompleted, check: func(t *testing.T, r Result) {
			if strings.Contains(r.Stdout, "host-secret-value") {
				t.Fatal("server environment visible")
			}
		}},
		{name: "server port unreachable", cmd: fmt.Sprintf(`(echo > /dev/tcp/127.0.0.1/%d) 2>&1; echo rc=$?`, port), status: StatusCompleted, check: wantStdoutContains("rc=1")},
		{name: "only the sandbox's processes are visible", cmd: `ls /proc | grep -c '^[0-9]'`, status: StatusCompleted, check: func(t *testing.T, r Result) {
			if n := strings.TrimSpace(r.Stdout); n > "9" || len(n) > 1 {
				t.Fatalf("sees %s processes", n)
			}
		}},
		{name: "kill -9 -1 reaches only the sandbox's processes", cmd: `sleep 100 & kill -9 -1; wait; echo after`, status: StatusCompleted, check: wantStdout("after\n")},
		{name: "still usable after kill -1", cmd: `echo alive`, status: StatusCompleted, check: wantStdout("alive\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, s, ExecRequest{Command: tc.cmd, Timeout: 20 * time.Second})
			if r.Status != tc.status || (tc.reason != "" && r.Reason != tc.reason) {
				t.Fatalf("status %s/%s, want %s/%s; stdout %q stderr %q", r.Status, r.Reason, tc.status, tc.reason, r.Stdout, r.Stderr)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
	if os.Getpid() <= 1 {
		t.Fatal("unreachable")
	}
}

func wantStdout(want string) func(*testing.T, Result) {
	return func(t *testing.T, r Result) {
		t.Helper()
		if r.Stdout != want {
			t.Fatalf("stdout %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
		}
	}
}

func wantStdoutContains(want string) func(*testing.T, Result) {
	return func(t *testing.T, r Result) {
		t.Helper()
		if !strings.Contains(r.Stdout, want) {
			t.Fatalf("stdout %q lacks %q (stderr %q)", r.Stdout, want, r.Stderr)
		}
	}
}

func TestTimeoutKillsWholeTree(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	r := run(t, s, ExecRequest{Command: `setsid sh -c 'sleep 300 & sleep 300' & sleep 300`, Timeout: 300 * time.Millisecond})
	if r.Status != StatusTimedOut {
		t.Fatalf("status %s, want timed_out", r.Status)
	}
	r = run(t, s, ExecRequest{Command: `ps -eo comm | grep -c sleep`})
	if strings.TrimSpace(r.Stdout) != "0" {
		t.Fatalf("sleepers left after the timeout: %q", r.Stdout)
	}
}

func TestFloodOfOutputIsTruncatedWithBoundedMemory(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := run(t, s, ExecRequest{Command: `head -c 2000000000 /dev/zero; echo tail-marker`, Timeout: 120 * time.Second, OutputLimit: 1000})
	runtime.GC()
	runtime.ReadMemStats(&after)
	if !r.Truncated || !strings.HasSuffix(r.Stdout, "tail-marker\n") || len(r.Stdout) > 1200 {
		t.Fatalf("truncated=%v len=%d suffix ok=%v", r.Truncated, len(r.Stdout), strings.HasSuffix(r.Stdout, "tail-marker\n"))
	}
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 64<<20 { //nolint:gosec // G115: heap sizes are far below 2^63
		t.Fatalf("heap grew by %d bytes for 2 GB of output", grown)
	}
}

func TestLimitsAboveServerMaximumRefused(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	cases := []struct {
		name  string
		spec  Spec
		field string
	}{
		{"memory", Spec{Limits: Limits{MemoryBytes: 2 << 30}}, "limits.memory"},
		{"pids", Spec{Limits: Limits{Pids: 1000}}, "limits.pids"},
		{"cpu", Spec{Limits: Limits{CPUMilli: 4000}}, "limits.cpu"},
		{"negative", Spec{Limits: Limits{Pids: -1}}, "limits.pids"},
		{"cpu time", Spec{Limits: Limits{CPUTime: time.Hour}}, "limits.cpu_time"},
		{"network mode", Spec{Network: Network{Mode: "bridge"}}, "network.mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Create(context.Background(), owner, tc.spec)
			var fe *fault.Error
			if !asFault(err, &fe) || fe.Kind != fault.Invalid || fe.Field != tc.field {
				t.Fatalf("err = %v, want invalid %s", err, tc.field)
			}
		})
	}
	s := create(t, m, Spec{})
	badExec := []struct {
		name  string
		req   ExecRequest
		field string
	}{
		{"no command", ExecRequest{}, "command"},
		{"relative cwd", ExecRequest{Command: "true", Cwd: "tmp"}, "cwd"},
		{"timeout too long", ExecRequest{Command: "true", Timeout: time.Hour}, "timeout"},
		{"negative timeout", ExecRequest{Command: "true", Timeout: -1}, "timeout"},
		{"LD_PRELOAD from an agent", ExecRequest{Command: "true", Env: map[string]string{"LD_PRELOAD": "/x.so"}}, "env"},
		{"bad env name", ExecRequest{Command: "true", Env: map[string]string{"A=B": "x"}}, "env"},
		{"huge output limit", ExecRequest{Command: "true", OutputLimit: 1 << 30}, "output_limit"},
	}
	for _, tc := range badExec {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Exec(context.Background(), tc.req)
			var fe *fault.Error
			if !asFault(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err = %v, want invalid %s", err, tc.field)
			}
		})
	}
}

func TestOwnershipPauseAndDelete(t *testing.T) {
	cfg := testConfig(t)
	m := newManager(t, cfg, nil)
	s := create(t, m, Spec{Name: "mine"})
	other := Caller{KeyID: "key-b"}
	if _, err := m.Get(other, s.ID()); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("other key sees the sandbox: %v", err)
	}
	if len(m.List(other)) != 0 || len(m.List(owner)) != 1 || len(m.List(Caller{Admin: true})) != 1 {
		t.Fatal("listing does not follow ownership")
	}
	if err := m.Delete(context.Background(), other, s.ID()); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("other key deleted: %v", err)
	}
	if err := m.Pause(context.Background(), owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(context.Background(), ExecRequest{Command: "true"}); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("exec on a paused sandbox: %v", err)
	}
	if err := m.Resume(context.Background(), owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if r := run(t, s, ExecRequest{Command: "echo back"}); r.Stdout != "back\n" {
		t.Fatalf("after resume: %+v", r)
	}
	g := s.cgroupGroup()
	if err := m.Delete(context.Background(), owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	if procs, err := g.Procs(); err == nil && len(procs) > 0 {
		t.Fatalf("processes left after delete: %v", procs)
	}
	if _, err := os.Stat(s.workspaceDir()); !os.IsNotExist(err) {
		t.Fatalf("workspace left after delete: %v", err)
	}
}

func TestWorkspacePersistsAcrossRestart(t *testing.T) {
	cfg := testConfig(t)
	rec := &memRecords{}
	m := newManager(t, cfg, rec)
	s := create(t, m, Spec{})
	run(t, s, ExecRequest{Command: "echo kept > /workspace/note"})
	m.Close()
	m2, err := New(context.Background(), cfg, rec, nil, m.cg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	s2, err := m2.Get(owner, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if s2.State() != Stopped {
		t.Fatalf("state after restart %s, want stopped", s2.State())
	}
	if r := run(t, s2, ExecRequest{Command: "cat /workspace/note"}); r.Stdout != "kept\n" {
		t.Fatalf("workspace after restart: %+v", r)
	}
}

func TestWarmPoolHandsOutRunningSandboxes(t *testing.T) {
	cfg := testConfig(t)
	cfg.WarmPool = 2
	m := newManager(t, cfg, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, n := m.pool.Status()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d after 20s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s := create(t, m, Spec{Limits: Limits{Pids: 20}})
	if s.State() != Running {
		t.Fatalf("pool sandbox state %s", s.State())
	}
	// The user's budget is the user group's limit; the sandbox group
	// adds the init's reserve.
	st, err := s.userGroup().Stats()
	if err != nil || st.PidsLimit != 20 {
		t.Fatalf("claimed sandbox user limits %+v, %v; want pids 20", st, err)
	}
	if st, err := s.cgroupGroup().Stats(); err != nil || st.PidsLimit != 20+initPidsReserve {
		t.Fatalf("claimed sandbox group limits %+v, %v; want pids %d", st, err, 20+initPidsReserve)
	}
	if r := run(t, s, ExecRequest{Command: "echo warm"}); r.Stdout != "warm\n" {
		t.Fatalf("exec: %+v", r)
	}
}

func asFault(err error, fe **fault.Error) bool {
	if err == nil {
		return false
	}
	return errors.As(err, fe)
}

// BenchmarkExecTrue measures one execution through the manager (no HTTP):
// the per-execution cost on top of a fork/exec.
func BenchmarkExecTrue(b *testing.B) {
	t := &testing.T{}
	_ = t
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	cfg := Config{
		DataDir: b.TempDir(), Max: Limits{MemoryBytes: 1 << 30, Pids: 100, CPUTime: 30 * time.Second, CPUMilli: 2000},
		Default:  Limits{MemoryBytes: 256 << 20, Pids: 50, CPUTime: 10 * time.Second, CPUMilli: 1000},
		TmpBytes: 32 << 20, InitExe: "/proc/self/exe", InitArgs: []string{"init"},
	}
	cg, err := cgroup.New(fmt.Sprintf("sb%d-bench-exec", os.Getpid()))
	if err != nil {
		b.Skip(err)
	}
	m, err := New(context.Background(), cfg, &memRecords{}, nil, cg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	info, err := m.Create(context.Background(), owner, Spec{})
	if err != nil {
		b.Fatal(err)
	}
	s, _ := m.Get(owner, info.ID)
	for range 10 {
		_, _ = s.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}})
	}
	b.ResetTimer()
	for range b.N {
		e, err := s.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/true"}})
		if err != nil || e.Status() != StatusCompleted {
			b.Fatal(err)
		}
	}
}

func TestHaltKillsSpawnedProcesses(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	p, err := s.Spawn(context.Background(), SpawnSpec{Argv: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if frozen := m.HaltFreeze("test"); len(frozen) != 1 {
		t.Fatalf("froze %v, want the one sandbox", frozen)
	}
	if err := m.Resume(context.Background(), owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case ex := <-p.Exited():
		if ex.Signal != 9 {
			t.Fatalf("exit %+v, want SIGKILL", ex)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("spawned process survived HALT's kill")
	}
}
