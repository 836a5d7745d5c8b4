package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/launcher"
	"github.com/sandhold/sandhold/internal/agent/proto"
	"github.com/sandhold/sandhold/internal/agent/sandboxinit"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent/initbin"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/testenv"
)

// The tests of an idle init's sleep (sleep_linux.go) run the lean init as
// `make build` links it: with the keeper as its entry point (amd64).

var keeperInit struct {
	once sync.Once
	prog []byte
	err  error
}

// keeperMemfd builds cmd/sandhold-init with -E main.keeperEntry (once per
// test binary) and returns it in a sealed memfd.
func keeperMemfd(t testing.TB) *os.File {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the keeper exists on amd64 only")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH:", err)
	}
	keeperInit.once.Do(func() {
		dir, err := os.MkdirTemp("", "sandhold-keeper-init-")
		if err != nil {
			keeperInit.err = err
			return
		}
		defer func() { _ = os.RemoveAll(dir) }()
		out := filepath.Join(dir, "sandhold-init")
		cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags", "-s -w -E main.keeperEntry", "-o", out, "github.com/sandhold/sandhold/cmd/sandhold-init") //nolint:gosec // G204: fixed arguments, a temp path
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			keeperInit.err = fmt.Errorf("build the lean init: %w\n%s", err, b)
			return
		}
		keeperInit.prog, keeperInit.err = os.ReadFile(out) //nolint:gosec // G304: the test's own temp file
	})
	if keeperInit.err != nil {
		t.Fatal(keeperInit.err)
	}
	f, err := initbin.Memfd(keeperInit.prog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// testSleepAfter is the tests' quiet period.
const testSleepAfter = 200 * time.Millisecond

// launchSleepy starts a lean init with the keeper and a short quiet period.
func launchSleepy(t *testing.T, mutate func(*proto.Setup)) *testSandbox {
	t.Helper()
	memfd := keeperMemfd(t)
	return launchWith(t, func(st *proto.Setup) {
		st.SleepAfterMs = int(testSleepAfter / time.Millisecond)
		if mutate != nil {
			mutate(st)
		}
	}, func(ls *LaunchSpec) { ls.ExeFile = memfd })
}

// procStatus reads fields of the host's /proc/<pid>/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// waitState waits until the init's name is want ("sandhold-keeper" asleep,
// "sandhold-init" awake) and returns its status then.
func waitState(t *testing.T, pid int, want string, within time.Duration) map[string]string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st := procStatus(t, pid)
		if st["Name"] == want && (want != sandboxinit.KeeperName || st["Threads"] == "1") {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("init %d still %q (%s threads) after %v, want %q", pid, st["Name"], st["Threads"], within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitAsleep(t *testing.T, ts *testSandbox) map[string]string {
	t.Helper()
	if ts.log != nil {
		defer func() {
			if t.Failed() {
				t.Logf("the init's log: %s", ts.log.String())
			}
		}()
	}
	return waitState(t, ts.Pid, sandboxinit.KeeperName, 20*time.Second)
}

// TestIdleInitSleeps: an idle init execs its keeper (one thread, tens of
// kB of its own), a call wakes it and is served, and it sleeps again.
func TestIdleInitSleeps(t *testing.T) {
	ts := launchSleepy(t, nil)
	for _, l := range ts.Ready.Layers {
		if !l.Active {
			t.Errorf("layer %s inactive: %s", l.Name, l.Detail)
		}
		if strings.HasPrefix(l.Name, "capabilities") && !strings.Contains(l.Detail, "in a keeper") {
			t.Errorf("capabilities layer does not say the init sleeps: %q", l.Detail)
		}
	}
	for round := range 3 {
		st := waitAsleep(t, ts)
		m, err := smapsRollup(ts.Pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d asleep: Pss_Anon %d kB, Rss %d kB, threads %s, VmPTE %s", round, m["Pss_Anon"], m["Rss"], st["Threads"], st["VmPTE"])
		if m["Pss_Anon"] > 100 {
			t.Errorf("asleep, the init holds %d kB of Pss_Anon, want tens of kB", m["Pss_Anon"])
		}
		r := ts.run(t, "sh", "-c", "echo woke")
		if r.exit.Code != 0 || r.stdout != "woke\n" {
			t.Fatalf("round %d: call after sleep: exit %d, stdout %q, stderr %q", round, r.exit.Code, r.stdout, r.stderr)
		}
		release := ts.holdAwake(t)
		if got := procStatus(t, ts.Pid)["Name"]; got != "sandhold-init" {
			t.Errorf("round %d: after the call the init is %q, want sandhold-init", round, got)
		}
		release()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, _, err := ts.File(ctx, proto.OpReadDir, proto.FileReq{Path: "/usr/bin", Limit: 5}); err != nil {
			t.Fatalf("round %d: file call: %v", round, err)
		}
		cancel()
	}
}

// TestWokenInitKeepsIsolation: every layer a command sees holds after the
// init slept and woke, and the init itself is non-dumpable, filtered and
// without new privileges again.
func TestWokenInitKeepsIsolation(t *testing.T) {
	ts := launchSleepy(t, func(st *proto.Setup) { st.AllowRoot = true })
	before := ts.run(t, "sh", "-c", "cat /proc/self/timerslack_ns")
	waitAsleep(t, ts)
	// The keeper itself: seccomp, no_new_privs and the bounding set of
	// the init's non-forking threads.
	st := procStatus(t, ts.Pid)
	if st["Seccomp"] != "2" || st["NoNewPrivs"] != "1" {
		t.Errorf("keeper: Seccomp %s NoNewPrivs %s, want 2 and 1", st["Seccomp"], st["NoNewPrivs"])
	}
	cases := []struct {
		name    string
		argv    []string
		want    string
		wantErr bool
	}{
		{"runs as the sandbox user", []string{"id", "-u"}, "1000\n", false},
		{"bounding set empty", []string{"sh", "-c", "grep CapBnd /proc/self/status"}, "CapBnd:\t0000000000000000\n", false},
		{"no capabilities", []string{"sh", "-c", "grep CapEff /proc/self/status"}, "CapEff:\t0000000000000000\n", false},
		{"no_new_privs", []string{"sh", "-c", "grep NoNewPrivs /proc/self/status"}, "NoNewPrivs:\t1\n", false},
		{"seccomp on", []string{"sh", "-c", "grep '^Seccomp:' /proc/self/status"}, "Seccomp:\t2\n", false},
		{"landlock: root read-only", []string{"sh", "-c", "touch /x"}, "", true},
		{"landlock: etc read-only", []string{"sh", "-c", "echo x >> /etc/passwd"}, "", true},
		{"workspace writable", []string{"sh", "-c", "echo hi > /workspace/f && cat /workspace/f"}, "hi\n", false},
		{"unshare refused", []string{"unshare", "-U", "true"}, "", true},
		{"the init is closed to the sandbox", []string{"cat", "/proc/1/environ"}, "", true},
		// ts.run puts each command in an execution group /x<n> of the
		// sandbox's; no path may show more of the host's hierarchy.
		{"the cgroup view is the sandbox's", []string{"awk", "-F:", `$3 !~ /^\/(x[0-9]+)?$/ {print}`, "/proc/self/cgroup"}, "", false},
		{"no signal starts ignored", []string{"sh", "-c", "grep '^SigIgn:' /proc/self/status"}, "SigIgn:\t0000000000000000\n", false},
		{"no signal starts blocked", []string{"sh", "-c", "grep '^SigBlk:' /proc/self/status"}, "SigBlk:\t0000000000000000\n", false},
		{"the timer slack as before the sleep", []string{"sh", "-c", "cat /proc/self/timerslack_ns"}, before.stdout, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Each case wakes a sleeping init.
			waitAsleep(t, ts)
			r := ts.run(t, tc.argv...)
			if tc.wantErr {
				if r.exit.Code == 0 {
					t.Fatalf("%v succeeded, want failure; stdout %q", tc.argv, r.stdout)
				}
				return
			}
			if r.exit.Code != 0 {
				t.Fatalf("%v exit %d, stderr %q", tc.argv, r.exit.Code, r.stderr)
			}
			if r.stdout != tc.want {
				t.Fatalf("%v = %q, want %q", tc.argv, r.stdout, tc.want)
			}
		})
	}
	t.Run("root command: bounding set empty", func(t *testing.T) {
		waitAsleep(t, ts)
		r := ts.runAs(t, true, "sh", "-c", "id -u; grep CapBnd /proc/self/status")
		if r.exit.Code != 0 {
			t.Fatalf("exit %d, stderr %q", r.exit.Code, r.stderr)
		}
		if r.stdout != "0\nCapBnd:\t0000000000000000\n" {
			t.Fatalf("root command: %q, want uid 0 with an empty bounding set", r.stdout)
		}
	})
	t.Run("the woken init", func(t *testing.T) {
		waitAsleep(t, ts)
		defer ts.holdAwake(t)()
		st := procStatus(t, ts.Pid)
		if st["Name"] != "sandhold-init" || st["Seccomp"] != "2" || st["NoNewPrivs"] != "1" {
			t.Fatalf("woken init: Name %s Seccomp %s NoNewPrivs %s", st["Name"], st["Seccomp"], st["NoNewPrivs"])
		}
	})
}

// runAs is testSandbox.run with the spawn's Root flag.
func (ts *testSandbox) runAs(t testing.TB, root bool, argv ...string) runResult {
	t.Helper()
	sub, err := ts.group.Sub(fmt.Sprintf("r%d", time.Now().UnixNano()%1e9), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Destroy() }()
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := ts.Spawn(ctx, proto.SpawnReq{
		Argv: argv,
		Env:  []string{"PATH=/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8"},
		Cwd:  "/workspace",
		Root: root,
	}, attach, ts.home)
	proto.CloseAll(attach)
	if err != nil {
		t.Fatalf("spawn %v: %v", argv, err)
	}
	defer p.Close()
	outc := make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.Stdout); outc <- string(b) }()
	errc := make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.Stderr); errc <- string(b) }()
	var ex proto.Exit
	select {
	case ex = <-p.Exited():
	case <-ctx.Done():
		t.Fatalf("%v did not exit", argv)
	}
	_ = sub.Kill()
	return runResult{stdout: <-outc, stderr: <-errc, exit: ex}
}

// fdCount is how many descriptors the host sees the init hold.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	return procEntries(t, pid, "fd")
}

// procEntries counts the entries of the host's /proc/<pid>/<dir>.
func procEntries(t *testing.T, pid int, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/%s", pid, dir))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestSleepWakeRoundsLeakNoDescriptors: many sleep/wake rounds leave the
// keeper and the woken init with the same descriptors as the first.
func TestSleepWakeRoundsLeakNoDescriptors(t *testing.T) {
	ts := launchSleepy(t, func(st *proto.Setup) { st.SleepAfterMs = 50 })
	waitState(t, ts.Pid, sandboxinit.KeeperName, 20*time.Second)
	asleep := fdCount(t, ts.Pid)
	ctx := context.Background()
	awake := -1
	for round := range 25 {
		if err := ts.Ping(ctx); err != nil {
			t.Fatalf("round %d: ping: %v", round, err)
		}
		if n := fdCount(t, ts.Pid); awake < 0 {
			awake = n
		} else if n > awake+2 {
			// The runtime may hold a descriptor or two of its own
			// for a moment (the poller, a /proc read).
			t.Errorf("round %d: the woken init holds %d descriptors, %d after the first wake", round, n, awake)
		}
		waitState(t, ts.Pid, sandboxinit.KeeperName, 20*time.Second)
		if n := fdCount(t, ts.Pid); n != asleep {
			t.Fatalf("round %d: the keeper holds %d descriptors, %d after the first sleep", round, n, asleep)
		}
	}
	// 0-2, the protocol socket (3), the program (5) and the resumed
	// init's state.
	if asleep != 6 {
		t.Errorf("the keeper holds %d descriptors, want 6 (0-2, 3, 5, the state)", asleep)
	}
}

// TestWokenInitHidesItsSetup: the sleeping init hands its Setup to the
// resumed one in a sealed memfd, not on its command line, which every
// process in the sandbox can read (/proc/1/cmdline is not guarded by
// dumpability). After a sleep and a wake a command sees only the
// descriptor's number there, cannot reach the memfd, and the sandbox
// works.
func TestWokenInitHidesItsSetup(t *testing.T) {
	ts := launchSleepy(t, func(st *proto.Setup) {
		st.Hostname = "hidden-host-name"
		st.LoopbackPorts = []uint16{31337}
	})
	for round := range 2 {
		waitAsleep(t, ts)
		host, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ts.Pid))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(strings.TrimSuffix(string(host), "\x00"), "\x00")
		if len(args) != 3 || args[0] != sandboxinit.KeeperName || args[1] != sandboxinit.ResumeName {
			t.Fatalf("round %d: the keeper's command line is %q, want %s %s <descriptor>", round, host, sandboxinit.KeeperName, sandboxinit.ResumeName)
		}
		fd, err := strconv.Atoi(args[2])
		if err != nil || fd <= proto.FDExe {
			t.Fatalf("round %d: the state's descriptor is %q", round, args[2])
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", ts.Pid, fd)); err != nil || !strings.HasPrefix(l, "/memfd:sandhold-resume") {
			t.Errorf("round %d: the keeper's descriptor %d is %q (%v), want the state's memfd", round, fd, l, err)
		}
		r := ts.run(t, "sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo; hostname")
		if r.exit.Code != 0 {
			t.Fatalf("round %d: exit %d, stderr %q", round, r.exit.Code, r.stderr)
		}
		if want := sandboxinit.ResumeName + " " + args[2] + " \nhidden-host-name\n"; r.stdout != want {
			t.Errorf("round %d: the woken init's command line and hostname read %q, want %q", round, r.stdout, want)
		}
		for _, leak := range []string{"setup", "31337", "{"} {
			if strings.Contains(r.stdout, leak) {
				t.Errorf("round %d: /proc/1/cmdline shows %q: %q", round, leak, r.stdout)
			}
		}
		// The memfd is closed in the woken init and was never a
		// command's: neither /proc/1/fd nor an inherited 6 reaches it.
		for _, argv := range [][]string{
			{"ls", "/proc/1/fd"},
			{"cat", "/proc/1/fd/" + args[2]},
			{"sh", "-c", "exec cat <&" + args[2]},
		} {
			if r := ts.run(t, argv...); r.exit.Code == 0 {
				t.Errorf("round %d: %v succeeded: %q", round, argv, r.stdout)
			}
		}
		if fds := hostFDLinks(t, ts.Pid); strings.Contains(fds, "sandhold-resume") {
			t.Errorf("round %d: the woken init still holds its state: %s", round, fds)
		}
	}
}

// hostFDLinks lists where the init's descriptors point, as the host sees
// them.
func hostFDLinks(t *testing.T, pid int) string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&b, "%s -> %s; ", e.Name(), l)
	}
	return b.String()
}

// TestRequestAtTheDeadlineIsNotLost: calls that arrive around the end of
// the quiet period — while the init stops reading, checks, execs its
// keeper, or while the keeper wakes — are all answered.
func TestRequestAtTheDeadlineIsNotLost(t *testing.T) {
	ts := launchSleepy(t, func(st *proto.Setup) { st.SleepAfterMs = 20 })
	ctx := context.Background()
	start := time.Now()
	for i := range 300 {
		// Pauses across the quiet period, in 1 ms steps.
		time.Sleep(time.Duration(i%40) * time.Millisecond)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := ts.Ping(cctx)
		cancel()
		if err != nil {
			t.Fatalf("call %d (%v in): %v", i, time.Since(start), err)
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ts.Pid))
	if err != nil {
		t.Fatal("the init is gone:", err)
	}
	_ = b
}

// TestBusySandboxDoesNotSleep: an init with a process in its sandbox — a
// running command, an orphan it adopted, a terminal — stays awake, and
// sleeps once they are gone.
func TestBusySandboxDoesNotSleep(t *testing.T) {
	ts := launchSleepy(t, nil)
	stayAwake := func(what string) {
		t.Helper()
		time.Sleep(5 * testSleepAfter)
		if name := procStatus(t, ts.Pid)["Name"]; name != "sandhold-init" {
			t.Fatalf("with %s, the init is %q, want it awake (its log: %s)", what, name, ts.log.String())
		}
	}
	// A running command.
	p, group := ts.spawnIn(t, proto.SpawnReq{Argv: []string{"sleep", "30"}})
	stayAwake("a running command")
	if err := group.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	p.Close()
	waitAsleep(t, ts)

	// An orphan: the command ends, its child is adopted by PID 1 and is
	// no child the init spawned.
	// (ts.run would kill the execution's group, orphan included.)
	sh, _ := ts.spawnIn(t, proto.SpawnReq{Argv: []string{"sh", "-c", "sleep 3 >/dev/null 2>&1 </dev/null &"}})
	if ex := <-sh.Exited(); ex.Code != 0 {
		t.Fatalf("orphan's parent: %+v", ex)
	}
	sh.Close()
	stayAwake("an orphan")
	waitAsleep(t, ts)

	// A terminal.
	term, _ := ts.spawnIn(t, proto.SpawnReq{Argv: []string{"sh"}, TTY: true, Rows: 24, Cols: 80})
	stayAwake("an open terminal")
	if _, err := term.PTY.Write([]byte("echo tty-ok; exit\n")); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, term.PTY) }()
	select {
	case ex := <-term.Exited():
		if ex.Code != 0 {
			t.Fatalf("terminal exit %+v", ex)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the terminal did not end")
	}
	term.Close()
	waitAsleep(t, ts)
}

// spawnIn spawns r in an execution group of its own; the group goes when
// the test ends.
func (ts *testSandbox) spawnIn(t *testing.T, r proto.SpawnReq) (*Process, cgroup.Group) {
	t.Helper()
	sub, err := ts.group.Sub(fmt.Sprintf("s%d", time.Now().UnixNano()%1e9), cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Kill(); _ = sub.Destroy() })
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	defer proto.CloseAll(attach)
	r.Env = []string{"PATH=/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8"}
	r.Cwd = "/workspace"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := ts.Spawn(ctx, r, attach, ts.home)
	if err != nil {
		t.Fatalf("spawn %v: %v", r.Argv, err)
	}
	return p, sub
}

// holdAwake wakes the init with a command that keeps it awake while it
// runs (TestBusySandboxDoesNotSleep) and returns what ends the command. A
// status read in between sees the awake init however long the test
// takes to get there; right after a short call, a loaded machine can let
// the quiet period pass and the init sleep again first.
func (ts *testSandbox) holdAwake(t *testing.T) (release func()) {
	t.Helper()
	p, group := ts.spawnIn(t, proto.SpawnReq{Argv: []string{"sleep", "60"}})
	return func() {
		_ = group.Kill()
		<-p.Exited()
		p.Close()
	}
}

const sleepyHelperEnv = "SANDHOLD_SLEEPY_HELPER"

// TestSleepyHelperServer is the server of TestSleepingInitDiesWithTheServer
// when run as its child: it starts a launcher and an init that can sleep,
// waits until the init sleeps, hands a copy of its end of the protocol
// socket to a process of its own (so the keeper sees no hang-up when the
// server dies), prints the pids and waits to be killed.
func TestSleepyHelperServer(t *testing.T) {
	if os.Getenv(sleepyHelperEnv) != "1" {
		t.Skip("helper of TestSleepingInitDiesWithTheServer")
	}
	l := startLauncher(t)
	memfd := keeperMemfd(t)
	ts := launchWith(t, func(st *proto.Setup) { st.SleepAfterMs = 100 }, func(ls *LaunchSpec) {
		viaLauncher(l)(ls)
		ls.ExeFile = memfd
	})
	waitAsleep(t, ts)
	end, err := ts.conn.Unix().File()
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "120")
	holder.ExtraFiles = []*os.File{end}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("pids %d %d %d %d\n", l.Pid(), ts.Pid, holder.Process.Pid, testSlot)
	select {}
}

// TestSleepingInitDiesWithTheServer: a sleeping init (its keeper) dies with
// the server by its parent-death signal, not only when its socket hangs
// up: the socket stays open in another process here.
func TestSleepingInitDiesWithTheServer(t *testing.T) {
	testenv.RequireSandboxes(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the keeper exists on amd64 only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSleepyHelperServer$", "-test.v") //nolint:gosec // G204: re-executes this test binary as the helper
	cmd.Env = append(os.Environ(), sleepyHelperEnv+"=1", "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	helper := cmd.Process.Pid
	var launcher, init, holder, slot int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "pids %d %d %d %d", &launcher, &init, &holder, &slot); err == nil {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if init == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the helper server started no sleeping init (see its output above)")
	}
	t.Cleanup(func() {
		_ = unix.Kill(holder, unix.SIGKILL)
		if cg, err := cgroup.New("sandhold-test-agent"); err == nil {
			if g, err := cg.Open(fmt.Sprintf("t%d-%d", helper, slot)); err == nil {
				_ = g.Destroy()
			}
			cg.Release() // the shared base goes with the last group in it
		}
	})
	if name := procStatus(t, init)["Name"]; name != sandboxinit.KeeperName {
		t.Fatalf("the helper's init is %q, want it asleep", name)
	}
	fd, err := unix.PidfdOpen(init, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Close(fd) }()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", holder)); err != nil {
		t.Fatal("the socket's holder died with the server; the test proves nothing")
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}} //nolint:gosec // G115: a descriptor
	if n, err := unix.Poll(pfd, 20_000); err != nil || n != 1 {
		t.Fatalf("the sleeping init %d outlived the killed server (poll %d, %v)", init, n, err)
	}
}

// TestFrozenSleepingInit: a sleeping sandbox paused (cgroup freezer) and
// resumed answers the call that came while it was frozen.
func TestFrozenSleepingInit(t *testing.T) {
	ts := launchSleepy(t, nil)
	waitAsleep(t, ts)
	if err := ts.group.Freeze(); err != nil {
		t.Skip("freezer unavailable:", err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- ts.Ping(ctx)
	}()
	select {
	case err := <-done:
		_ = ts.group.Thaw()
		t.Fatalf("a frozen sandbox answered (%v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := ts.group.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal("the call made while frozen:", err)
	}
	r := ts.run(t, "sh", "-c", "echo thawed")
	if r.stdout != "thawed\n" {
		t.Fatalf("after thaw: %q %q", r.stdout, r.stderr)
	}
}

// TestSleepWithEgressListener: an init with an egress listener sleeps with
// it (descriptor 4 in the keeper) and relays connections after a wake.
func TestSleepWithEgressListener(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no python3 to connect from inside the sandbox")
	}
	conns := make(chan *os.File, 4)
	memfd := keeperMemfd(t)
	ts := launchWith(t, func(st *proto.Setup) {
		st.SleepAfterMs = int(testSleepAfter / time.Millisecond)
		st.EgressListen = true
		st.TCPConnect = []uint16{proto.EgressPort}
	}, func(ls *LaunchSpec) {
		ls.ExeFile = memfd
		ls.OnConn = func(f *os.File) { conns <- f }
	})
	for round := range 2 {
		waitAsleep(t, ts)
		if n := fdCount(t, ts.Pid); n != 7 {
			t.Errorf("round %d: the keeper holds %d descriptors, want 7 (0-2, 3, 4, 5, the state)", round, n)
		}
		r := ts.run(t, "python3", "-c", fmt.Sprintf("import socket; s = socket.create_connection(('127.0.0.1', %d)); s.sendall(b'hi'); print('sent')", proto.EgressPort))
		if r.exit.Code != 0 || r.stdout != "sent\n" {
			t.Fatalf("round %d: connect: exit %d %q %q", round, r.exit.Code, r.stdout, r.stderr)
		}
		select {
		case f := <-conns:
			buf := make([]byte, 2)
			if _, err := io.ReadFull(f, buf); err != nil || string(buf) != "hi" {
				t.Errorf("round %d: relayed connection read %q, %v", round, buf, err)
			}
			_ = f.Close()
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: no connection relayed", round)
		}
	}
}

// TestFailedSleepIsReported: an idle init that cannot sleep says so in the
// server's log (its stderr) with the reason and its counts, stays awake
// and serves, sleeps once the cause is gone, and the woken init carries
// the counts on. The failure is real: the host lowers the init's open
// files limit to nothing, so it cannot list its processes.
func TestFailedSleepIsReported(t *testing.T) {
	ts := launchSleepy(t, nil)
	waitAsleep(t, ts)
	ctx := context.Background()
	if err := ts.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// As the sandbox's owner: host root has no capability over the
	// sandbox's user namespace that it lacks on the host (here
	// CAP_SYS_RESOURCE may be missing), and prlimit on a process of the
	// same ids needs none.
	prlimit := func(lim, old *unix.Rlimit) error {
		return launcher.AsOwner(ts.base, ts.base, func() error { return unix.Prlimit(ts.Pid, unix.RLIMIT_NOFILE, lim, old) })
	}
	var old unix.Rlimit
	if err := prlimit(nil, &old); err != nil {
		t.Fatal(err)
	}
	if err := prlimit(&unix.Rlimit{Cur: 0, Max: old.Max}, nil); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := prlimit(&old, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitLog := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			for line := range strings.Lines(ts.log.String()) {
				if strings.Contains(line, want) {
					return line
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the init's log: %s", want, ts.log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	line := waitLog("failed 1 of ")
	if !strings.Contains(line, "idle sleep failed") || !strings.Contains(line, "too many open files") || !strings.Contains(line, "slept 1)") {
		t.Errorf("the report: %q", line)
	}
	if name := procStatus(t, ts.Pid)["Name"]; name != "sandhold-init" {
		t.Fatalf("the init is %q, want it awake", name)
	}
	if err := ts.Ping(ctx); err != nil {
		t.Fatal("an init that could not sleep does not answer:", err)
	}
	restore()
	waitAsleep(t, ts)
	if err := ts.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// The woken init fails again: its count goes on from the one that
	// slept, and a second failure of the same reason is logged (2 is a
	// power of two).
	if err := prlimit(&unix.Rlimit{Cur: 0, Max: old.Max}, nil); err != nil {
		t.Fatal(err)
	}
	line = waitLog("failed 2 of ")
	restore()
	if !strings.Contains(line, "slept 2)") {
		t.Errorf("the woken init's report does not count the sleeps before: %q", line)
	}
	waitAsleep(t, ts)
}

// TestWokenInitSysmonKeepsItsSlack: after a wake, the runtime's sysmon (the
// first thread the resumed runtime starts: the lowest id after 1 in the
// sandbox's pid namespace) has sandboxinit.SysmonSlack, inherited from the thread that
// exec'd the keeper, and the forking thread (1) its slack from before.
func TestWokenInitSysmonKeepsItsSlack(t *testing.T) {
	ts := launchSleepy(t, nil)
	def := readSlack(t, "/proc/self/timerslack_ns") // the init inherits ours
	waitAsleep(t, ts)
	if err := ts.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", ts.Pid))
	if err != nil {
		t.Fatal(err)
	}
	slack := map[int]int64{}
	sysmon := 0
	for _, e := range ents {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", ts.Pid, e.Name()))
		if err != nil {
			continue
		}
		inner, ok := sandboxinit.InnermostNSpid(string(st))
		if !ok {
			t.Fatalf("thread %s: no NSpid", e.Name())
		}
		slack[inner] = readSlack(t, "/proc/"+e.Name()+"/timerslack_ns")
		if inner > 1 && (sysmon == 0 || inner < sysmon) {
			sysmon = inner
		}
	}
	t.Logf("the woken init's threads (id in the sandbox: slack ns): %v", slack)
	if slack[1] != def {
		t.Errorf("the forking thread's slack is %d ns, want %d", slack[1], def)
	}
	if sysmon == 0 || slack[sysmon] != sandboxinit.SysmonSlack {
		t.Errorf("sysmon (thread %d) has a slack of %d ns, want %d", sysmon, slack[sysmon], sandboxinit.SysmonSlack)
	}
}
