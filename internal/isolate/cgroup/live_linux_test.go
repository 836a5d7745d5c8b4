package cgroup

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/testenv"
)

// cleanupWait bounds waiting for a fixture process in cleanup (the tests'
// other waits are testenv.Eventually's, on conditions).
const cleanupWait = 5 * time.Second

// requireCgroups skips unless the test runs as root on a host whose
// detected back end has every controller New needs, and returns a Manager
// on a fresh base that is reaped and removed when the test ends, even
// when it fails.
func requireCgroups(t *testing.T) Manager {
	t.Helper()
	testenv.SkipShort(t, "makes cgroups")
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	info, err := Detect()
	if err != nil {
		t.Skipf("no usable cgroups: %v", err)
	}
	m, err := New(testBaseName())
	if err != nil {
		t.Skipf("cgroup v%d back end unusable here: %v", info.Version, err)
	}
	cleanupManager(t, m)
	return m
}

// requireV1 is requireCgroups for tests of v1-only behaviour.
func requireV1(t *testing.T) *v1Manager {
	t.Helper()
	m := requireCgroups(t)
	v1, ok := m.(*v1Manager)
	if !ok {
		t.Skipf("host uses cgroup v%d; this test exercises v1", m.Info().Version)
	}
	return v1
}

type backend struct {
	name string
	m    Manager
}

// testBackends returns every back end this host can exercise for real:
// the detected one (v1 here) and, where the unified hierarchy is mounted
// without controllers (a hybrid host), "v2-core": the v2 back end with no
// controllers, which still exercises its core files (cgroup.procs,
// cgroup.freeze, cgroup.kill, cgroup.events, cpu.stat, the sealing into
// the leaf, CLONE_INTO_CGROUP). Each is reaped and removed at the end.
func testBackends(t *testing.T) []backend {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	var out []backend
	info, derr := Detect()
	if derr == nil {
		base := testBaseName()
		if m, err := New(base); err == nil {
			cleanupManager(t, m)
			out = append(out, backend{"v" + strconv.Itoa(info.Version), m})
		} else {
			t.Logf("cgroup v%d back end unusable: %v", info.Version, err)
		}
	}
	if lay, err := detectLayout(); err == nil && lay.v2 != nil && lay.info.Version == 1 {
		if m, err := newCoreV2(lay.v2.own, testBaseName()); err == nil {
			cleanupManager(t, m)
			out = append(out, backend{"v2-core", m})
		} else {
			t.Logf("v2-core back end unusable: %v", err)
		}
	}
	if len(out) == 0 {
		t.Skipf("no usable cgroup back end (detect: %v)", derr)
	}
	return out
}

// newCoreV2 builds a v2 manager without controllers below own.
func newCoreV2(own, base string) (*v2Manager, error) {
	m := &v2Manager{info: Info{Version: 2, Mounts: map[string]string{}}, baseDir: filepath.Join(own, base)}
	if err := os.Mkdir(m.baseDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	for _, f := range []string{"cgroup.freeze", "cgroup.kill"} {
		if _, err := os.Stat(filepath.Join(m.baseDir, f)); err != nil {
			_ = unix.Rmdir(m.baseDir)
			return nil, fmt.Errorf("no %s (kernel too old): %w", f, err)
		}
	}
	return m, nil
}

func testBaseName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sandhold-test-" + hex.EncodeToString(b[:])
}

func cleanupManager(t *testing.T, m Manager) {
	t.Cleanup(func() {
		if _, err := Reap(m, nil); err != nil {
			t.Errorf("cleanup reap: %v", err)
		}
		for _, d := range baseDirs(m) {
			if err := rmdirRetry(d); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

// forEachBackend runs fn against every back end of testBackends.
func forEachBackend(t *testing.T, fn func(t *testing.T, m Manager)) {
	t.Helper()
	for _, b := range testBackends(t) {
		t.Run(b.name, func(t *testing.T) { fn(t, b.m) })
	}
}

// canLimit reports whether m's groups carry the memory, pids and cpu
// controllers (false for v2-core).
func canLimit(m Manager) bool {
	if v2, ok := m.(*v2Manager); ok {
		return len(v2.ctrls) > 0
	}
	return true
}

// reopen stands for a restarted server: a new Manager on m's base.
func reopen(t *testing.T, m Manager) Manager {
	t.Helper()
	base := filepath.Base(baseDirs(m)[0])
	if !canLimit(m) {
		m2, err := newCoreV2(filepath.Dir(baseDirs(m)[0]), base)
		if err != nil {
			t.Fatal(err)
		}
		return m2
	}
	m2, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	return m2
}

func baseDirs(m Manager) []string {
	switch m := m.(type) {
	case *v1Manager:
		var out []string
		for _, h := range m.hiers {
			out = append(out, h.baseDir)
		}
		return out
	case *v2Manager:
		return []string{m.baseDir}
	}
	return nil
}

// groupDirs is every directory of g (one per hierarchy on v1).
func groupDirs(g Group) []string {
	switch g := g.(type) {
	case *v1Group:
		var out []string
		for _, h := range g.hiers() {
			out = append(out, filepath.Join(h.baseDir, g.rel))
		}
		return out
	case *v2Group:
		return []string{g.dir()}
	}
	return nil
}

func mustCreate(t *testing.T, m Manager, name string, l Limits) Group {
	t.Helper()
	g, err := m.Create(name, l)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	return g
}

// gatedCmd is a command started outside any test group that waits for a
// line on stdin before doing anything, so it can be put into a group
// before it runs its script.
type gatedCmd struct {
	cmd  *exec.Cmd
	gate io.WriteCloser
}

func startGated(t *testing.T, script string) *gatedCmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read go; "+script)
	gate, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	gc := &gatedCmd{cmd: cmd, gate: gate}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		// Bounded: a process left frozen by a failing test acts on the
		// kill only when the group cleanup (registered earlier, so run
		// later) thaws it; never hang the suite on it.
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(cleanupWait):
			t.Logf("pid %d still there after kill; left to the group cleanup", cmd.Process.Pid)
		}
	})
	return gc
}

func (c *gatedCmd) release(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(c.gate, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// startIn starts script gated, moves it into g, then lets it run.
func startIn(t *testing.T, g Group, script string) *gatedCmd {
	t.Helper()
	c := startGated(t, script)
	if err := g.AddProc(c.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	c.release(t)
	return c
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

func statField(t *testing.T, pid, field int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	return f[field-3]
}

func readPidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testenv.Eventually(t, "pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

func TestDetectThisHost(t *testing.T) {
	info, err := Detect()
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	if info.Version != 1 && info.Version != 2 {
		t.Fatalf("version %d", info.Version)
	}
	for c, mnt := range info.Mounts {
		var st unix.Statfs_t
		if err := unix.Statfs(mnt, &st); err != nil {
			t.Fatalf("%s mount %s: %v", c, mnt, err)
		}
		if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
			t.Fatalf("%s mount %s is not a cgroup filesystem (type %#x)", c, mnt, st.Type)
		}
	}
}

func TestCreateDestroyLeavesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		tests := []struct {
			name string
			l    Limits
		}{
			{"unlimited", Limits{}},
			{"all limits", Limits{MemoryBytes: 256 << 20, Pids: 50, CPUMilli: 500}},
			{"fractional cpu", Limits{CPUMilli: 10}},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if tt.l != (Limits{}) && !canLimit(m) {
					t.Skip("back end without controllers")
				}
				name := "g" + strconv.Itoa(i)
				g := mustCreate(t, m, name, tt.l)
				subLimits := Limits{Pids: 10}
				if !canLimit(m) {
					subLimits = Limits{}
				}
				sub, err := g.Sub("exec1", subLimits)
				if err != nil {
					t.Fatal(err)
				}
				dirs := append(groupDirs(g), groupDirs(sub)...)
				for _, d := range dirs {
					if _, err := os.Stat(d); err != nil {
						t.Fatalf("missing after create: %v", err)
					}
				}
				st, err := g.Stats()
				if err != nil {
					t.Fatal(err)
				}
				if st.MemoryLimit != tt.l.MemoryBytes || st.PidsLimit != tt.l.Pids {
					t.Fatalf("stats limits %d/%d, want %d/%d", st.MemoryLimit, st.PidsLimit, tt.l.MemoryBytes, tt.l.Pids)
				}
				if _, err := m.Create(name, Limits{}); !errors.Is(err, fs.ErrExist) {
					t.Fatalf("second Create: %v, want ErrExist", err)
				}
				names, err := m.List()
				if err != nil || !slices.Contains(names, name) {
					t.Fatalf("List = %v, %v; want %q in it", names, err, name)
				}
				if _, err := m.Open(name); err != nil {
					t.Fatalf("Open: %v", err)
				}
				if err := g.Destroy(); err != nil {
					t.Fatal(err)
				}
				for _, d := range dirs {
					if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
						t.Fatalf("%s still there after Destroy (%v)", d, err)
					}
				}
				if err := g.Destroy(); err != nil {
					t.Fatalf("second Destroy: %v", err)
				}
				if _, err := m.Open(name); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Open after Destroy: %v, want ErrNotFound", err)
				}
			})
		}
		for _, bad := range []string{"..", "a/b", "", ".procs"} {
			if _, err := m.Create(bad, Limits{}); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Create(%q) = %v, want ErrInvalidName", bad, err)
			}
		}
	})
}

func TestV1LimitFiles(t *testing.T) {
	m := requireV1(t)
	g := mustCreate(t, m, "files", Limits{MemoryBytes: 64 << 20, Pids: 7, CPUMilli: 250})
	gv := g.(*v1Group)
	want := map[string]string{
		gv.dir("memory") + "/memory.limit_in_bytes": strconv.Itoa(64 << 20),
		gv.dir("memory") + "/memory.swappiness":     "0",
		gv.dir("pids") + "/pids.max":                "7",
		gv.dir("cpu") + "/cpu.cfs_quota_us":         "25000",
		gv.dir("cpu") + "/cpu.cfs_period_us":        "100000",
	}
	if _, err := os.Stat(gv.dir("memory") + "/memory.memsw.limit_in_bytes"); err == nil {
		want[gv.dir("memory")+"/memory.memsw.limit_in_bytes"] = strconv.Itoa(64 << 20)
	}
	// TCP buffers: charged (and bounded) once a limit is written.
	if _, err := os.Stat(gv.dir("memory") + "/memory.kmem.tcp.limit_in_bytes"); err == nil {
		want[gv.dir("memory")+"/memory.kmem.tcp.limit_in_bytes"] = strconv.Itoa(64 << 20)
	}
	for p, w := range want {
		got, err := readString(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(got) != w {
			t.Errorf("%s = %q, want %q", filepath.Base(p), strings.TrimSpace(got), w)
		}
	}
	// Raising and lifting must keep memsw >= limit at every step.
	for _, l := range []Limits{{MemoryBytes: 512 << 20}, {}, {MemoryBytes: 32 << 20}} {
		if err := g.SetLimits(l); err != nil {
			t.Fatalf("SetLimits(%+v): %v", l, err)
		}
		st, err := g.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.MemoryLimit != l.MemoryBytes {
			t.Fatalf("after SetLimits(%+v): MemoryLimit %d", l, st.MemoryLimit)
		}
	}
}

func TestForkBombStopsAtPidsMax(t *testing.T) {
	m := requireCgroups(t)
	const limit = 20
	g := mustCreate(t, m, "bomb", Limits{Pids: limit})
	// Each iteration forks a sleep; past pids.max the forks fail and the
	// shell carries on trying.
	bomb := startIn(t, g, `i=0; while [ $i -lt 300 ]; do sleep 60 & i=$((i+1)); done 2>/dev/null; wait`)
	// pids.events "max" counts forks the limit refused.
	eventsFile := ""
	switch gv := g.(type) {
	case *v1Group:
		eventsFile = gv.dir("pids") + "/pids.events"
	case *v2Group:
		eventsFile = gv.dir() + "/pids.events"
	}
	testenv.Eventually(t, "a fork to be refused at pids.max", func() bool {
		n, err := readKeyed(eventsFile, "max")
		return err == nil && n > 0
	})
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Pids != limit { // nothing in the bomb exits for 60 s
		t.Fatalf("pids.current %d with pids.max %d after a refused fork", st.Pids, limit)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if procs, err := g.Procs(); err != nil || len(procs) != 0 {
		t.Fatalf("after Kill: procs %v, %v", procs, err)
	}
	_ = bomb.cmd.Wait()
	// The group stays usable: a new process runs in it.
	c := startIn(t, g, "exit 7")
	err = c.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("process after the bomb: %v", err)
	}
}

func TestMemoryBalloonIsOOMKilled(t *testing.T) {
	m := requireCgroups(t)
	sbx := mustCreate(t, m, "sbx", Limits{MemoryBytes: 256 << 20})
	g, err := sbx.Sub("balloon", Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	script := `exec awk 'BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }'`
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		script = `exec /usr/bin/python3 -c 'b = b"\x01" * (300 << 20)'`
	}
	c := startIn(t, g, script)
	err = c.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("balloon exited with %v, want a kill", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("balloon ended with %v, want SIGKILL", ws)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills < 1 {
		t.Fatalf("OOMKills = %d after an OOM kill", st.OOMKills)
	}
	if st.MemoryPeak > 64<<20 {
		t.Fatalf("peak %d above the limit", st.MemoryPeak)
	}
	// The sandbox's figure includes its executions' kills (v1 sums the
	// subtree, v2's memory.events is hierarchical).
	pst, err := sbx.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if pst.OOMKills < st.OOMKills {
		t.Fatalf("sandbox OOMKills %d < execution's %d", pst.OOMKills, st.OOMKills)
	}
	for _, c := range []struct {
		g    Group
		want int64
	}{{g, st.OOMKills}, {sbx, pst.OOMKills}} {
		if n, err := c.g.OOMKills(); err != nil || n != c.want {
			t.Fatalf("OOMKills() = %d, %v; Stats says %d", n, err, c.want)
		}
	}
}

func TestFreezeStopsCPU(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		g := mustCreate(t, m, "busy", Limits{})
		c := startIn(t, g, `while :; do :; done`)
		usage := func() time.Duration {
			st, err := g.Stats()
			if err != nil {
				t.Fatal(err)
			}
			return st.CPUUsage
		}
		testenv.Eventually(t, "the loop to use CPU", func() bool { return usage() > 0 })
		if err := g.Freeze(); err != nil {
			t.Fatal(err)
		}
		st, _ := g.Stats()
		if !st.Frozen {
			t.Fatal("Stats.Frozen false after Freeze")
		}
		before := usage()
		time.Sleep(100 * time.Millisecond) // a window in which a running loop would use CPU
		after := usage()
		if after != before {
			t.Fatalf("CPU usage moved while frozen: %v -> %v", before, after)
		}
		if !alive(c.cmd.Process.Pid) {
			t.Fatal("frozen process died")
		}
		if err := g.Thaw(); err != nil {
			t.Fatal(err)
		}
		if st, _ := g.Stats(); st.Frozen {
			t.Fatal("Stats.Frozen true after Thaw")
		}
		testenv.Eventually(t, "the loop to run again after Thaw", func() bool { return usage() > after })
	})
}

// TestCPUUsageCountsDetachedChildren: CPUUsage (an execution's cpu_ms)
// counts a child that left its parent (setsid, double fork) and the
// descendant groups, and agrees with Stats.
func TestCPUUsageCountsDetachedChildren(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		g := mustCreate(t, m, "cpu", Limits{})
		sub, err := g.Sub("x1", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		_ = startIn(t, sub, `setsid sh -c 'while :; do :; done' & exit 0`)
		testenv.Eventually(t, "the detached loop to use CPU", func() bool {
			d, err := g.CPUUsage()
			if err != nil {
				t.Fatal(err)
			}
			return d >= 20*time.Millisecond
		})
		d, err := g.CPUUsage()
		if err != nil {
			t.Fatal(err)
		}
		st, err := g.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.CPUUsage < d {
			t.Fatalf("Stats.CPUUsage %v below CPUUsage %v read before it", st.CPUUsage, d)
		}
		if err := g.Kill(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestKillCatchesSetsidDoubleFork(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		g := mustCreate(t, m, "escape", Limits{})
		pidFile := filepath.Join(t.TempDir(), "pid")
		// The middle shell starts a new session, forks sleep and exits, so
		// sleep is orphaned, reparented and in another session than ours.
		c := startIn(t, g, `setsid /bin/sh -c 'sleep 300 & echo $! > `+pidFile+`' ; sleep 300`)
		pid := readPidFile(t, pidFile)
		if statField(t, pid, 6) == statField(t, c.cmd.Process.Pid, 6) {
			t.Fatal("fixture broken: the grandchild did not get its own session")
		}
		if procs, _ := g.Procs(); !slices.Contains(procs, pid) {
			t.Fatalf("grandchild %d not listed in %v", pid, procs)
		}
		if err := g.Kill(); err != nil {
			t.Fatal(err)
		}
		if procs, err := g.Procs(); err != nil || len(procs) != 0 {
			t.Fatalf("after Kill: %v, %v", procs, err)
		}
		testenv.Eventually(t, "the setsid grandchild to die", func() bool { return !alive(pid) })
	})
}

func TestKillSubLeavesParentAlive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		g := mustCreate(t, m, "sbx", Limits{})
		keeper := startIn(t, g, `sleep 300`)
		sub1, err := g.Sub("exec1", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		sub2, err := g.Sub("exec2", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		pidFile := filepath.Join(t.TempDir(), "pid")
		victim := startIn(t, sub1, `setsid /bin/sh -c 'sleep 300 & echo $! > `+pidFile+`'; sleep 300`)
		grandchild := readPidFile(t, pidFile)
		other := startIn(t, sub2, `sleep 300`)

		all, err := g.Procs()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []int{keeper.cmd.Process.Pid, victim.cmd.Process.Pid, grandchild, other.cmd.Process.Pid} {
			if !slices.Contains(all, p) {
				t.Fatalf("parent Procs %v misses %d", all, p)
			}
		}
		if err := sub1.Kill(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "exec1's tree to die", func() bool { return !alive(grandchild) && !alive(victim.cmd.Process.Pid) })
		for _, p := range []int{keeper.cmd.Process.Pid, other.cmd.Process.Pid} {
			if !alive(p) {
				t.Fatalf("process %d outside the killed sub-group died", p)
			}
		}
		if err := sub1.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := g.Destroy(); err != nil {
			t.Fatal(err)
		}
		if alive(keeper.cmd.Process.Pid) || alive(other.cmd.Process.Pid) {
			t.Fatal("Destroy of the parent left processes alive")
		}
	})
}

// ownTasksFiles opens this process's own v1 groups' tasks files, to move a
// thread back, as the init does with its sandbox group's files.
func ownTasksFiles(t *testing.T, m *v1Manager) []*os.File {
	t.Helper()
	var fs []*os.File
	for _, h := range m.hiers {
		f, err := os.OpenFile(h.ownDir+"/tasks", os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() }) // a tasks file; each write already reported its error
		fs = append(fs, f)
	}
	return fs
}

// cgroupOf returns the v1 cgroup path of task /proc/<path>/cgroup for
// the hierarchy holding ctrl.
func cgroupOf(t *testing.T, procPath, ctrl string) string {
	t.Helper()
	f, err := os.Open("/proc/" + procPath + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // read-only procfs file
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), ctrl) {
			return parts[2]
		}
	}
	t.Fatalf("no %s line for %s", ctrl, procPath)
	return ""
}

func TestV1ThreadAttach(t *testing.T) {
	m := requireV1(t)
	g := mustCreate(t, m, "sbx", Limits{})
	sub, err := g.Sub("exec1", Limits{Pids: 5})
	if err != nil {
		t.Fatal(err)
	}
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range attach {
			_ = f.Close() // a tasks file; each write already reported its error
		}
	}()
	if len(attach) != len(m.hiers) {
		t.Fatalf("%d attach files for %d hierarchies", len(attach), len(m.hiers))
	}
	back := ownTasksFiles(t, m)

	type result struct {
		tid, pid        int
		whileIn         []int // sub.Procs() while our thread was inside
		killWhileInside error
		subTasks        map[int]bool // tasks in the sub-group before the fork
		newThreads      int
		err             error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		var r result
		r.tid = unix.Gettid()
		tidStr := strconv.Itoa(r.tid)
		for _, f := range attach {
			if _, err := f.WriteString(tidStr); err != nil {
				r.err = err
				done <- r // thread may be half-moved: never unlock, let it die
				return
			}
		}
		r.whileIn, _ = sub.Procs()
		r.killWhileInside = sub.Kill()
		// Make the runtime start threads while we sit in the sub-group:
		// goroutines woken from this locked thread, blocking in
		// syscalls, need new Ms. None may inherit the sub-group.
		threadsBefore := countThreads()
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ts := unix.Timespec{Nsec: 20e6}
				_ = unix.Nanosleep(&ts, nil)
			}()
		}
		wg.Wait()
		r.newThreads = countThreads() - threadsBefore
		r.subTasks, _ = collectPids(groupDirs(sub), "tasks")
		cmd := exec.Command("sleep", "30")
		startErr := cmd.Start()
		for _, f := range back {
			if _, err := f.WriteString(tidStr); err != nil {
				r.err = err
				if cmd.Process != nil {
					_ = cmd.Process.Kill()
				}
				done <- r // stuck in the sub-group: let the thread die with us
				return
			}
		}
		runtime.UnlockOSThread()
		if startErr != nil {
			r.err = startErr
		} else {
			r.pid = cmd.Process.Pid
			go func() { _ = cmd.Wait() }()
		}
		done <- r
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { _ = unix.Kill(r.pid, unix.SIGKILL) })

	self := os.Getpid()
	if !slices.Contains(r.whileIn, self) {
		t.Errorf("v1 semantics changed: cgroup.procs did not list us (%v) while one thread was inside", r.whileIn)
	}
	if !errors.Is(r.killWhileInside, ErrContainsSelf) {
		t.Errorf("Kill with our thread inside = %v, want ErrContainsSelf", r.killWhileInside)
	}
	t.Logf("runtime started %d threads while our thread was in the sub-group", r.newThreads)
	if len(r.subTasks) != 1 || !r.subTasks[r.tid] {
		t.Errorf("tasks in the sub-group while our thread visited: %v, want only %d (a runtime thread inherited it)", r.subTasks, r.tid)
	}
	subRel := g.(*v1Group).rel + "/exec1"
	for _, h := range m.hiers {
		ctrl := h.controllers[0]
		if got := cgroupOf(t, strconv.Itoa(r.pid), ctrl); !strings.HasSuffix(got, "/"+subRel) {
			t.Errorf("%s: sleep is in %q, want the sub-group", ctrl, got)
		}
		if got := cgroupOf(t, strconv.Itoa(self)+"/task/"+strconv.Itoa(r.tid), ctrl); strings.HasSuffix(got, "/"+subRel) {
			t.Errorf("%s: our thread is still in the sub-group", ctrl)
		}
	}
	procs, err := sub.Procs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(procs, []int{r.pid}) {
		t.Fatalf("sub-group procs %v, want only the sleep %d", procs, r.pid)
	}
	if err := sub.Kill(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the sleep to die", func() bool { return !alive(r.pid) })
}

// TestV1KillSparesVisitor: a process with one thread visiting the group
// (as the init's forking thread does) is not killed with the group's
// members; Kill waits for it to leave.
func TestV1KillSparesVisitor(t *testing.T) {
	m := requireV1(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3 for a two-threaded fixture")
	}
	g := mustCreate(t, m, "exec", Limits{})
	member := startIn(t, g, "sleep 300")
	// A two-threaded process that prints its second thread's TID, then
	// waits for stdin to close.
	visitor := exec.Command("/usr/bin/python3", "-c", `
import sys, threading
ev = threading.Event()
def run():
    print(threading.get_native_id(), flush=True); ev.wait()
threading.Thread(target=run, daemon=True).start()
sys.stdin.read()`)
	stdin, _ := visitor.StdinPipe()
	out, _ := visitor.StdoutPipe()
	if err := visitor.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = visitor.Process.Kill(); _ = visitor.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	tid := strings.TrimSpace(line)
	for _, d := range groupDirs(g) {
		if err := writeString(d+"/tasks", tid); err != nil {
			t.Fatal(err)
		}
	}
	if procs, _ := g.Procs(); !slices.Contains(procs, visitor.Process.Pid) {
		t.Fatalf("fixture broken: visitor %d not listed in %v", visitor.Process.Pid, procs)
	}
	killed := make(chan error, 1)
	go func() { killed <- g.Kill() }()
	testenv.Eventually(t, "the member to die", func() bool { return !alive(member.cmd.Process.Pid) })
	if !alive(visitor.Process.Pid) {
		t.Fatal("Kill killed a process that only had a thread visiting")
	}
	for _, h := range m.hiers {
		if err := writeString(h.ownDir+"/tasks", tid); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-killed; err != nil {
		t.Fatalf("Kill after the visitor left: %v", err)
	}
	if !alive(visitor.Process.Pid) {
		t.Fatal("visitor died")
	}
	if err := stdin.Close(); err != nil {
		t.Error(err)
	}
}

func TestReapRemovesLeftovers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		left := mustCreate(t, m, "leftover", Limits{})
		sub, err := left.Sub("exec9", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		c1 := startIn(t, left, "sleep 300")
		c2 := startIn(t, sub, "sleep 300")
		mustCreate(t, m, "keepme", Limits{})

		// A new Manager on the same base stands for the restarted server.
		m2 := reopen(t, m)
		names, err := m2.List()
		if err != nil || !slices.Equal(names, []string{"keepme", "leftover"}) {
			t.Fatalf("List = %v, %v", names, err)
		}
		kept, err := m2.Open("leftover")
		if err != nil {
			t.Fatal(err)
		}
		if subs, err := kept.Subs(); err != nil || !slices.Equal(subs, []string{"exec9"}) {
			t.Fatalf("Subs of the re-adopted group = %v, %v", subs, err)
		}
		if s9, err := kept.OpenSub("exec9"); err != nil {
			t.Fatal(err)
		} else if procs, err := s9.Procs(); err != nil || !slices.Contains(procs, c2.cmd.Process.Pid) {
			t.Fatalf("re-adopted execution procs %v, %v", procs, err)
		}
		if _, err := kept.OpenSub("nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("OpenSub of a missing child = %v", err)
		}
		reaped, err := Reap(m2, func(n string) bool { return n == "keepme" })
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(reaped, []string{"leftover"}) {
			t.Fatalf("reaped %v", reaped)
		}
		testenv.Eventually(t, "leftover processes to die", func() bool {
			return !alive(c1.cmd.Process.Pid) && !alive(c2.cmd.Process.Pid)
		})
		if names, _ := m2.List(); !slices.Equal(names, []string{"keepme"}) {
			t.Fatalf("after Reap: %v", names)
		}
		for _, d := range groupDirs(left) {
			if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s survived Reap", d)
			}
		}
	})
}

func TestV1ReapHalfCreated(t *testing.T) {
	m := requireV1(t)
	// A crash between mkdirs leaves a group in some hierarchies only.
	if err := os.Mkdir(filepath.Join(m.hiers[0].baseDir, "half"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("half"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a half-created group = %v, want a reap hint", err)
	}
	reaped, err := Reap(m, nil)
	if err != nil || !slices.Equal(reaped, []string{"half"}) {
		t.Fatalf("Reap = %v, %v", reaped, err)
	}
}

func TestDelegate(t *testing.T) {
	m := requireCgroups(t)
	g := mustCreate(t, m, "deleg", Limits{MemoryBytes: 64 << 20})
	const uid, gid = 100000, 100000
	if err := g.Delegate(uid, gid); err != nil {
		t.Fatal(err)
	}
	for _, d := range groupDirs(g) {
		owned := []string{d, d + "/cgroup.procs"}
		rootOnly := []string{}
		if m.Info().Version == 1 {
			owned = append(owned, d+"/tasks")
			if strings.Contains(d, "/memory/") {
				rootOnly = append(rootOnly, d+"/memory.limit_in_bytes")
			}
		} else {
			owned = append(owned, d+"/cgroup.subtree_control")
			rootOnly = append(rootOnly, d+"/memory.max")
		}
		for _, p := range owned {
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != uid || st.Gid != gid {
				t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, uid, gid)
			}
		}
		for _, p := range rootOnly {
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != 0 {
				t.Errorf("%s handed to %d: the delegate could lift its own limit", p, st.Uid)
			}
		}
	}
}

func TestV2SealAndCloneIntoCgroup(t *testing.T) {
	ran := false
	forEachBackend(t, func(t *testing.T, m Manager) {
		if m.Info().Version != 2 {
			t.Skip("v1: no sealing")
		}
		ran = true
		testV2Seal(t, m)
	})
	if !ran {
		t.Skip("no v2 back end (not even v2-core) on this host")
	}
}

func testV2Seal(t *testing.T, m Manager) {
	g := mustCreate(t, m, "v2g", Limits{})
	gv := g.(*v2Group)
	c := startIn(t, g, "sleep 300") // the init stand-in
	pid := c.cmd.Process.Pid
	if own, err := collectPids([]string{gv.dir()}, "cgroup.procs"); err != nil || !own[pid] {
		t.Fatalf("unsealed group does not hold the process itself: %v, %v", own, err)
	}
	sub, err := g.Sub("exec1", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if leaf, err := collectPids([]string{gv.leaf()}, "cgroup.procs"); err != nil || !leaf[pid] {
		t.Fatalf("seal did not move the process into the leaf: %v, %v", leaf, err)
	}
	if !distributes(gv.dir(), gv.m.ctrls) {
		t.Fatal("sealed group does not distribute the controllers")
	}
	subFiles, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	defer subFiles[0].Close() //nolint:errcheck // a cgroup directory fd, only passed to clone3
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(subFiles[0].Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatalf("clone into cgroup: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	procs, err := sub.Procs()
	if err != nil || !slices.Equal(procs, []int{cmd.Process.Pid}) {
		t.Fatalf("sub procs %v, %v", procs, err)
	}
	if err := sub.Kill(); err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatal("killing the execution group killed the init stand-in")
	}
}

func countThreads() int {
	ents, _ := os.ReadDir("/proc/self/task")
	return len(ents)
}

// TestKillReachesFrozenSubGroup: killing a sandbox whose execution was
// paused on its own still ends that execution (frozen tasks act on SIGKILL
// only once thawed).
func TestKillReachesFrozenSubGroup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		g := mustCreate(t, m, "sbx", Limits{})
		sub, err := g.Sub("exec1", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		c := startIn(t, sub, "sleep 300")
		if err := sub.Freeze(); err != nil {
			t.Fatal(err)
		}
		if err := g.Kill(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the paused execution to die", func() bool { return !alive(c.cmd.Process.Pid) })
		if err := g.Destroy(); err != nil {
			t.Fatal(err)
		}
	})
}
