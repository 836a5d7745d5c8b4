package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent/launcher"
	"github.com/sandhold/sandhold/internal/agent/proto"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/testenv"
)

// startLauncher starts a launcher running this test binary, closed when
// the test ends.
func startLauncher(t *testing.T) *Launcher {
	t.Helper()
	testenv.RequireSandboxes(t)
	var log strings.Builder
	l, err := StartLauncher(LauncherSpec{Exe: "/proc/self/exe", Args: []string{"init"}, Log: &log})
	if err != nil {
		t.Fatalf("start launcher: %v (it said: %s)", err, log.String())
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func viaLauncher(l *Launcher) func(*LaunchSpec) {
	return func(ls *LaunchSpec) { ls.Launcher = l }
}

// ppidOf reads a process's parent from /proc.
func ppidOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no PPid in /proc/%d/status", pid)
	return 0
}

// TestLauncherInitIsTheServersChild: an init started by the launcher is
// this process's child (CLONE_PARENT), not the launcher's, and works.
func TestLauncherInitIsTheServersChild(t *testing.T) {
	l := startLauncher(t)
	ts := launchWith(t, nil, viaLauncher(l))
	if got := ppidOf(t, ts.Pid); got != os.Getpid() {
		t.Fatalf("init's parent is %d, want the server %d (launcher %d)", got, os.Getpid(), l.Pid())
	}
	if r := ts.run(t, "/bin/sh", "-c", "echo $$"); r.exit.Code != 0 || strings.TrimSpace(r.stdout) == "" {
		t.Fatalf("command in a launched init: %+v", r)
	}
}

// TestLauncherInitExitIsSeen: the server reaps an init the launcher
// started and sees how it ended, whether it killed it or it died on its
// own; nothing is left as a zombie.
func TestLauncherInitExitIsSeen(t *testing.T) {
	l := startLauncher(t)
	for _, tc := range []struct {
		name string
		end  func(*testSandbox)
	}{
		{"killed by the server", func(ts *testSandbox) { ts.Kill() }},
		{"died on its own", func(ts *testSandbox) { _ = unix.Kill(ts.Pid, unix.SIGKILL) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := launchWith(t, nil, viaLauncher(l))
			tc.end(ts)
			select {
			case <-ts.Exited():
			case <-time.After(20 * time.Second):
				t.Fatal("the init's exit was not seen")
			}
			if got := ts.ExitStatus(); got != "signal: killed" {
				t.Fatalf("exit status %q, want signal: killed", got)
			}
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", ts.Pid)); err == nil {
				t.Fatalf("init %d still in /proc after its reap (zombie)", ts.Pid)
			}
		})
	}
}

// TestLauncherKeepsNoSandboxDescriptors: after launches, the launcher
// holds nothing of a sandbox: no workspace, no init socket, no program
// memfd, no pidfd; only its own socket to the server and /dev/null.
func TestLauncherKeepsNoSandboxDescriptors(t *testing.T) {
	l := startLauncher(t)
	for range 3 {
		launchWith(t, nil, viaLauncher(l))
	}
	dir := fmt.Sprintf("/proc/%d/fd", l.Pid())
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sockets := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		switch {
		case target == "/dev/null", target == "anon_inode:[eventpoll]", target == "anon_inode:[eventfd]",
			strings.HasPrefix(target, "pipe:"), strings.HasPrefix(target, "/sys/fs/cgroup/"):
			// its own: stdio, the Go runtime's poller and the cgroup CPU
			// limit files it watches (the server's group, close-on-exec)
		case strings.HasPrefix(target, "socket:"):
			sockets++
			if e.Name() != strconv.Itoa(launcher.FDConn) {
				t.Errorf("launcher holds a socket at %s: %s", e.Name(), target)
			}
		default:
			t.Errorf("launcher holds %s -> %s", e.Name(), target)
		}
	}
	if sockets != 1 {
		t.Errorf("launcher holds %d sockets, want its one to the server", sockets)
	}
}

// TestLauncherRestartsAfterKill: a launcher that died is started again by
// the next launch, and the inits it started live on.
func TestLauncherRestartsAfterKill(t *testing.T) {
	l := startLauncher(t)
	first := launchWith(t, nil, viaLauncher(l))
	old := l.Pid()
	if err := unix.Kill(old, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); l.Pid() == old; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the launcher's death was not seen")
		}
	}
	second := launchWith(t, nil, viaLauncher(l))
	if l.Pid() == 0 || l.Pid() == old || l.starts != 2 {
		t.Fatalf("launcher pid %d (old %d), %d starts; want a second launcher", l.Pid(), old, l.starts)
	}
	for _, ts := range []*testSandbox{first, second} {
		if r := ts.run(t, "/bin/true"); r.exit.Code != 0 {
			t.Fatalf("init %d after the launcher's restart: %+v", ts.Pid, r)
		}
	}
}

// TestLauncherRestartsWhenDeathUnseen: a launcher killed just before a
// request (its death not yet noticed) costs that request nothing: it goes
// to a new launcher.
func TestLauncherRestartsWhenDeathUnseen(t *testing.T) {
	l := startLauncher(t)
	l.mu.Lock()
	p := l.cur
	if err := unix.Kill(p.cmd.Process.Pid, unix.SIGKILL); err != nil {
		l.mu.Unlock()
		t.Fatal(err)
	}
	// Wait for the kernel to end it, not for the server to notice.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if f := strings.Fields(string(b)); len(f) > 2 && (f[2] == "Z" || f[2] == "X") || len(b) == 0 {
			break
		}
		if time.Now().After(deadline) {
			l.mu.Unlock()
			t.Fatal("the launcher did not die")
		}
	}
	l.mu.Unlock()
	ts := launchWith(t, nil, viaLauncher(l))
	if r := ts.run(t, "/bin/true"); r.exit.Code != 0 {
		t.Fatalf("after a restart: %+v", r)
	}
}

// TestLauncherFailedExecLeavesNoChild: an init whose exec fails after the
// clone is reaped by the server's sweep (the launcher cannot wait for a
// child that is not its own), and the error names no host path.
func TestLauncherFailedExecLeavesNoChild(t *testing.T) {
	l := startLauncher(t)
	ws, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ws.Close() }()
	const missing = "/nonexistent/sandhold-init-missing"
	_, err = Launch(context.Background(), LaunchSpec{Exe: missing, HostUID: 1 << 30, HostGID: 1 << 30,
		Workspace: ws, Launcher: l})
	if err == nil {
		t.Fatal("launch of a missing program succeeded")
	}
	if strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("error carries the host path: %v", err)
	}
	kids, err := l.children()
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 || kids[0] != l.Pid() {
		t.Fatalf("children of the launcher thread after a failed launch: %v, want only the launcher %d", kids, l.Pid())
	}
}

// TestLauncherConcurrentLaunches: launches from many goroutines at once
// each get their own working init, all children of the server.
func TestLauncherConcurrentLaunches(t *testing.T) {
	l := startLauncher(t)
	const n = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := make([]*testSandbox, n)
	for i := range n {
		// launchWith is not safe for concurrent use (test slots, t.Fatal in
		// goroutines); the concurrency under test is Launch's, so each
		// goroutine launches with a spec prepared up front.
		wg.Add(1)
		spec := prepareLaunch(t, viaLauncher(l))
		go func() {
			defer wg.Done()
			ts, err := spec()
			if err != nil {
				t.Errorf("launch %d: %v", i, err)
				return
			}
			mu.Lock()
			got[i] = ts
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[int]bool{}
	for _, ts := range got {
		if seen[ts.Pid] {
			t.Fatalf("pid %d twice", ts.Pid)
		}
		seen[ts.Pid] = true
		if p := ppidOf(t, ts.Pid); p != os.Getpid() {
			t.Fatalf("init %d's parent %d, want %d", ts.Pid, p, os.Getpid())
		}
		if r := ts.run(t, "/bin/true"); r.exit.Code != 0 {
			t.Fatalf("init %d: %+v", ts.Pid, r)
		}
	}
}

const launcherHelperEnv = "SANDHOLD_LAUNCHER_HELPER"

// TestLauncherHelperServer is the server of TestInitDiesWithTheServer when
// run as its child: it starts a launcher and an init, prints their pids
// and its sandbox's cgroup, and waits to be killed.
func TestLauncherHelperServer(t *testing.T) {
	if os.Getenv(launcherHelperEnv) != "1" {
		t.Skip("helper of TestInitDiesWithTheServer")
	}
	l := startLauncher(t)
	ts := launchWith(t, nil, viaLauncher(l))
	fmt.Printf("pids %d %d %d\n", l.Pid(), ts.Pid, testSlot)
	select {}
}

// TestInitDiesWithTheServer: when the server is killed, its launcher and
// the inits the launcher started die with it (Pdeathsig through
// CLONE_PARENT).
func TestInitDiesWithTheServer(t *testing.T) {
	testenv.RequireSandboxes(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLauncherHelperServer$", "-test.v") //nolint:gosec // G204: re-executes this test binary as the helper
	// The helper is killed, so its own temp dirs are never removed: they
	// go under this test's, which is.
	cmd.Env = append(os.Environ(), launcherHelperEnv+"=1", "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	helper := cmd.Process.Pid
	var launcher, init, slot int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "pids %d %d %d", &launcher, &init, &slot); err == nil {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if launcher == 0 || init == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Skip("the helper server started no init (see its output above)")
	}
	t.Cleanup(func() {
		if cg, err := cgroup.New("sandhold-test-agent"); err == nil {
			if g, err := cg.Open(fmt.Sprintf("t%d-%d", helper, slot)); err == nil {
				_ = g.Destroy()
			}
			cg.Release() // the shared base goes with the last group in it
		}
	})
	var pidfds []int
	for _, pid := range []int{launcher, init} {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd of %d: %v", pid, err)
		}
		defer func() { _ = unix.Close(fd) }()
		pidfds = append(pidfds, fd)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for i, fd := range pidfds {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}} //nolint:gosec // G115: a descriptor
		n, err := unix.Poll(pfd, 20_000)
		if err != nil || n != 1 {
			t.Fatalf("%s %d outlived the killed server (poll %d, %v)", []string{"launcher", "init"}[i], []int{launcher, init}[i], n, err)
		}
	}
}

// describeFDs lists this process's descriptors with their kinds (inode
// numbers and paths left out, so two launches compare).
func describeFDs() string {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err.Error()
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, n := range names {
		if n == strconv.Itoa(int(d.Fd())) {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + n)
		if err != nil {
			continue
		}
		kind, _, _ := strings.Cut(target, ":")
		switch {
		case target == "/dev/null", strings.HasPrefix(target, "anon_inode:"):
			kind = target
		case strings.HasPrefix(target, "/memfd:"):
			kind = "memfd"
		case strings.HasPrefix(target, "/"):
			kind = "path"
		}
		out = append(out, n+"="+kind)
	}
	slices.SortFunc(out, func(a, b string) int {
		x, _ := strconv.Atoi(strings.Split(a, "=")[0])
		y, _ := strconv.Atoi(strings.Split(b, "=")[0])
		return x - y
	})
	return strings.Join(out, " ")
}

// TestLauncherInitGetsTheSameDescriptors: an init cloned by the launcher
// starts with exactly the descriptors one cloned by the server does (the
// program here lists them and exits instead of serving).
func TestLauncherInitGetsTheSameDescriptors(t *testing.T) {
	l := startLauncher(t)
	got := map[string]string{}
	for _, via := range []struct {
		name string
		l    *Launcher
	}{{"server", nil}, {"launcher", l}} {
		ws, err := os.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var log syncBuilder
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = Launch(ctx, LaunchSpec{Exe: "/proc/self/exe", Args: []string{"fds"}, HostUID: 1 << 30, HostGID: 1 << 30,
			Workspace: ws, Log: &log, Launcher: via.l})
		cancel()
		_ = ws.Close()
		if err == nil {
			t.Fatal("the listing program served as an init")
		}
		// The log copier may still be writing: it ends with the init.
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "\n") && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		_, list, ok := strings.Cut(log.String(), "fds: ")
		if !ok {
			t.Fatalf("%s: no listing in %q", via.name, log.String())
		}
		got[via.name] = strings.TrimSpace(list)
	}
	// The server passes on whatever the test process holds inheritable
	// (go test's own descriptors; the daemon marks them close-on-exec at
	// start); the launcher closed those when it started. Everything else
	// must be the same.
	server := map[string]bool{}
	for _, f := range strings.Fields(got["server"]) {
		server[f] = true
	}
	for _, f := range strings.Fields(got["launcher"]) {
		if !server[f] {
			t.Errorf("an init from the launcher holds %s, one from the server does not", f)
		}
	}
	for _, f := range strings.Fields(got["server"]) {
		if n, _ := strconv.Atoi(strings.Split(f, "=")[0]); n <= proto.FDWorkspace && !strings.Contains(" "+got["launcher"]+" ", " "+f+" ") {
			t.Errorf("an init from the launcher lacks %s", f)
		}
	}
	t.Logf("from the server:   %s", got["server"])
	// Descriptor 4 stays closed: the workspace comes with the setup
	// request, and the init's runtime opens no files of its own there
	// (GODEBUG containermaxprocs=0; the idle sleep's keeper needs 4).
	if !strings.HasPrefix(got["launcher"], "0=/dev/null 1=/dev/null 2=pipe 3=socket ") ||
		strings.Contains(" "+got["launcher"], " 4=") {
		t.Fatalf("descriptors of an init: %s", got["launcher"])
	}
	t.Log(got["launcher"])
}

// TestLauncherRefusesHostAccountIDs: the launcher maps no sandbox onto the
// host's own accounts (uid 0 inside would be host root or a system user).
func TestLauncherRefusesHostAccountIDs(t *testing.T) {
	l := startLauncher(t)
	ws, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ws.Close() }()
	for _, id := range []uint32{0, 1000, IDRange - 1} {
		_, err := Launch(context.Background(), LaunchSpec{Exe: "/proc/self/exe", HostUID: id, HostGID: 1 << 30, Workspace: ws, Launcher: l})
		if err == nil || !strings.Contains(err.Error(), "overlaps the host's accounts") {
			t.Fatalf("host uid %d: %v, want a refusal", id, err)
		}
	}
	if kids, err := l.children(); err != nil || len(kids) != 1 {
		t.Fatalf("children after refusals: %v %v", kids, err)
	}
}
