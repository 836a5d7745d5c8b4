package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/sandhold/sandhold/internal/agent/proto"
	"github.com/sandhold/sandhold/internal/agent/sandboxinit"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/isolate/rootfs"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestMain lets the test binary serve as the init: Launch re-executes it
// with the argument "init".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "fds" {
		// TestLauncherInitGetsTheSameDescriptors: what an init receives.
		fmt.Fprintln(os.Stderr, "fds:", describeFDs())
		os.Exit(3)
	}
	if len(os.Args) > 1 && os.Args[1] == "init" {
		if err := sandboxinit.Entry(); err != nil {
			fmt.Fprintln(os.Stderr, "init:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testSandbox is one init started for a test, with its cgroup.
type testSandbox struct {
	*Instance
	group cgroup.Group
	home  []*os.File
	ws    string
	// base is the sandbox's first host id (its uid 0, the owner of its
	// user namespace).
	base uint32
	// log is what the init wrote to its stderr (the server's log).
	log *syncBuilder
}

var testSlot = 0

func launch(t testing.TB, mutate func(*proto.Setup)) *testSandbox {
	t.Helper()
	return launchWith(t, mutate, nil)
}

// launchWith is launch with changes to the launch spec (the init program,
// its GOMAXPROCS).
func launchWith(t testing.TB, mutate func(*proto.Setup), spec func(*LaunchSpec)) *testSandbox {
	t.Helper()
	ts, err := prepareLaunchSetup(t, mutate, spec)()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// prepareLaunch makes a sandbox's cgroup and workspace and returns the
// launch itself, which may run on another goroutine.
func prepareLaunch(t testing.TB, spec func(*LaunchSpec)) func() (*testSandbox, error) {
	t.Helper()
	return prepareLaunchSetup(t, nil, spec)
}

func prepareLaunchSetup(t testing.TB, mutate func(*proto.Setup), spec func(*LaunchSpec)) func() (*testSandbox, error) {
	t.Helper()
	testenv.RequireSandboxes(t)
	cg, err := cgroup.New("sandhold-test-agent")
	if err != nil {
		t.Skip("cgroups unavailable:", err)
	}
	testSlot++
	name := fmt.Sprintf("t%d-%d", os.Getpid(), testSlot)
	group, err := cg.Create(name, cgroup.Limits{MemoryBytes: 512 << 20, Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the group goes, then the base shared by
	// every test of the package (rmdir fails, harmlessly, while another
	// test's group is in it).
	t.Cleanup(cg.Release)
	t.Cleanup(func() { _ = group.Destroy() })
	base := uint32(1<<30 + (500+testSlot)*IDRange) //nolint:gosec // G115: small test slots
	ws := t.TempDir()
	if err := os.Chown(ws, int(base)+1000, int(base)+1000); err != nil {
		t.Fatal(err)
	}
	wsf, err := rootfs.DetachedMount(ws)
	if err != nil {
		t.Fatal(err)
	}
	setup := proto.Setup{Hostname: "sandbox", UID: 1000, GID: 1000, TmpBytes: 64 << 20, ShmBytes: 16 << 20, CgroupVersion: cg.Info().Version}
	if mutate != nil {
		mutate(&setup)
	}
	log := &syncBuilder{}
	ls := LaunchSpec{
		Exe: "/proc/self/exe", HostUID: base, HostGID: base, Workspace: wsf,
		Place: group.AddProc, Setup: setup, Log: log,
	}
	if spec != nil {
		spec(&ls)
	}
	return func() (*testSandbox, error) {
		defer func() { _ = wsf.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		inst, err := Launch(ctx, ls)
		if err != nil {
			return nil, fmt.Errorf("launch: %w (init said: %s)", err, log.String())
		}
		t.Cleanup(inst.Kill)
		home, err := group.OpenThreadAttach()
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { proto.CloseAll(home) })
		return &testSandbox{Instance: inst, group: group, home: home, ws: ws, base: base, log: log}, nil
	}
}

// syncBuilder is a strings.Builder the init's log copier and the test can
// share.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type runResult struct {
	stdout, stderr string
	exit           proto.Exit
}

func (ts *testSandbox) run(t *testing.T, argv ...string) runResult {
	t.Helper()
	sub, err := ts.group.Sub(fmt.Sprintf("x%d", time.Now().UnixNano()%1e9), cgroup.Limits{})
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
	}, attach, ts.home)
	for _, f := range attach {
		_ = f.Close()
	}
	if err != nil {
		t.Fatalf("spawn %v: %v", argv, err)
	}
	defer p.Close()
	outc := make(chan string, 2)
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

func TestInitRunsCommandsIsolated(t *testing.T) {
	ts := launch(t, nil)
	for _, l := range ts.Ready.Layers {
		if !l.Active {
			t.Errorf("layer %s inactive: %s", l.Name, l.Detail)
		}
	}
	cases := []struct {
		name    string
		argv    []string
		want    string
		wantErr bool // non-zero exit expected
	}{
		{"runs as the sandbox user", []string{"id", "-u"}, "1000\n", false},
		{"hostname", []string{"hostname"}, "sandbox\n", false},
		{"pid namespace: the init is the parent, pid 1", []string{"sh", "-c", "echo $PPID"}, "1\n", false},
		{"workspace is the cwd", []string{"pwd"}, "/workspace\n", false},
		{"workspace writable", []string{"sh", "-c", "echo hi > /workspace/f && cat /workspace/f"}, "hi\n", false},
		{"tmp writable", []string{"sh", "-c", "echo t > /tmp/t && cat /tmp/t"}, "t\n", false},
		{"root read-only", []string{"sh", "-c", "touch /x"}, "", true},
		{"usr read-only", []string{"sh", "-c", "touch /usr/x"}, "", true},
		{"etc read-only", []string{"sh", "-c", "echo x >> /etc/passwd"}, "", true},
		{"no host shadow", []string{"cat", "/etc/shadow"}, "", true},
		{"etc host entry read-only", []string{"sh", "-c", "echo x >> /etc/ld.so.cache"}, "", true},
		// /etc and every host entry bound into it: one recursive
		// mount_setattr makes all of them ro, nosuid, nodev (rootfs.buildEtc).
		{"every mount under /etc ro, nosuid, nodev", []string{"sh", "-c", `awk '$5=="/etc" || $5 ~ /^\/etc\// {n++; o=","$6","; if (o !~ /,ro,/ || o !~ /,nosuid,/ || o !~ /,nodev,/) bad=bad" "$5":"$6} END {if (n < 2) print "only " n " mounts"; else if (bad != "") print "writable:" bad; else print "ok"}' /proc/self/mountinfo`}, "ok\n", false},
		{"no root home contents", []string{"ls", "/root"}, "", true},
		{"only loopback", []string{"sh", "-c", "ls /proc/sys/net/ipv4/conf | sort | tr '\\n' ' '"}, "all default lo ", false},
		{"bounding set empty", []string{"sh", "-c", "grep CapBnd /proc/self/status"}, "CapBnd:\t0000000000000000\n", false},
		{"no_new_privs", []string{"sh", "-c", "grep NoNewPrivs /proc/self/status"}, "NoNewPrivs:\t1\n", false},
		{"seccomp on", []string{"sh", "-c", "grep '^Seccomp:' /proc/self/status"}, "Seccomp:\t2\n", false},
		{"unshare refused", []string{"unshare", "-U", "true"}, "", true},
		{"mount refused", []string{"sh", "-c", "mount -t tmpfs x /tmp"}, "", true},
		{"environment from scratch", []string{"sh", "-c", "env | cut -d= -f1 | grep -v '^PWD$' | sort | tr '\\n' ' '"}, "HOME LANG PATH ", false},
		// Host-wide state about other tenants and the host (rootfs.procMaskFiles).
		{"host-wide /proc files read empty", []string{"sh", "-c", "cat /proc/diskstats /proc/partitions /proc/cmdline /proc/locks /proc/interrupts | wc -c"}, "0\n", false},
		{"masked /proc directory is empty", []string{"sh", "-c", "ls -A /proc/acpi 2>/dev/null | wc -l"}, "0\n", false},
		// The mask is a read-only bind of the root's file system, no
		// superblock of its own (each costs every v1 memory cgroup).
		{"masked /proc directory is read-only, on the root's superblock", []string{"sh", "-c", `m=$(awk '$5=="/proc/acpi"{print $3, $6}' /proc/self/mountinfo); r=$(awk '$5=="/"{print $3}' /proc/self/mountinfo); if [ -z "$m" ]; then echo "same ro"; else set -- $m; if [ "$1" = "$r" ]; then echo "same ${2%%,*}"; else echo "own $1 (root $r) $2"; fi; fi`}, "same ro\n", false},
		{"/dev has no file system of its own", []string{"sh", "-c", `awk '$5=="/dev"' /proc/self/mountinfo | wc -l`}, "0\n", false},
		{"/dev read-only", []string{"sh", "-c", "touch /dev/x"}, "", true},
		{"no signal starts ignored", []string{"sh", "-c", "grep '^SigIgn:' /proc/self/status"}, "SigIgn:\t0000000000000000\n", false},
		// Per-user kernel counts (kernellimits_linux.go): the namespace's
		// own maxima and the init's hard rlimits, which no command raises.
		{"inotify maxima of the namespace", []string{"sh", "-c", "cat /proc/sys/user/max_inotify_instances /proc/sys/user/max_inotify_watches /proc/sys/user/max_user_namespaces"}, "128\n65536\n0\n", false},
		{"queued signals, message queues, locked memory: hard rlimits", []string{"bash", "-c", "ulimit -Hi; ulimit -Hq; ulimit -Hl; ulimit -i"}, "4096\n819200\n8192\n4096\n", false},
		{"an rlimit cannot be raised", []string{"bash", "-c", "ulimit -Hi 5000"}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
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
			if tc.want != "" && r.stdout != tc.want {
				t.Fatalf("%v = %q, want %q", tc.argv, r.stdout, tc.want)
			}
		})
	}
	t.Run("host sees the workspace file owned by the mapped user", func(t *testing.T) {
		var st unix.Stat_t
		if err := unix.Stat(ts.ws+"/f", &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid < 1<<30 {
			t.Fatalf("file owned by host uid %d, want one in the sandbox's range", st.Uid)
		}
	})
	t.Run("user namespace owned by the sandbox's own host uid", func(t *testing.T) {
		// Seen from the host: the owner every per-user count is charged
		// to up the chain (kernel/ucount.c), not root.
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", ts.Pid))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		const nsGetOwnerUID = 0xb704 // NS_GET_OWNER_UID (linux/nsfs.h)
		var uid uint32
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); e != 0 { //nolint:gosec // G103: the ioctl writes one uint32
			t.Fatal(e)
		}
		if uid < 1<<30 {
			t.Fatalf("the sandbox's user namespace is owned by host uid %d, want the sandbox's own (its range starts at 2^30)", uid)
		}
	})
	t.Run("environment holds nothing of the server", func(t *testing.T) {
		t.Setenv("SANDHOLD_SECRET_PROBE", "leak")
		r := ts.run(t, "env")
		if strings.Contains(r.stdout, "SANDHOLD_SECRET_PROBE") {
			t.Fatal("server environment leaked")
		}
	})
}

func TestInitFilePrimitives(t *testing.T) {
	ts := launch(t, nil)
	ctx := context.Background()
	if _, _, err := ts.File(ctx, proto.OpMkdir, proto.FileReq{Path: "/workspace/a/b", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	_, f, err := ts.File(ctx, proto.OpOpen, proto.FileReq{Path: "/workspace/a/b/file", Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("content"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	fr, _, err := ts.File(ctx, proto.OpStat, proto.FileReq{Path: "/workspace/a/b/file"})
	if err != nil || fr.Stat.Size != 7 || fr.Stat.UID != 1000 {
		t.Fatalf("stat = %+v, %v; want size 7 owned by 1000", fr, err)
	}
	fr, _, err = ts.File(ctx, proto.OpReadDir, proto.FileReq{Path: "/workspace/a/b"})
	if err != nil || len(fr.Entries) != 1 || fr.Entries[0].Name != "file" {
		t.Fatalf("readdir = %+v, %v", fr, err)
	}
	if _, _, err := ts.File(ctx, proto.OpSymlink, proto.FileReq{Path: "/etc/passwd", Path2: "/workspace/link"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		op   proto.Op
		req  proto.FileReq
		want error
	}{
		{"missing", proto.OpStat, proto.FileReq{Path: "/workspace/nope"}, fs.ErrNotExist},
		{"write outside the workspace", proto.OpOpen, proto.FileReq{Path: "/etc/x", Flags: unix.O_WRONLY | unix.O_CREAT, Mode: 0o644}, nil},
		{"symlink not followed when asked", proto.OpOpen, proto.FileReq{Path: "/workspace/link", NoFollow: true}, nil},
		{"magic link refused", proto.OpOpen, proto.FileReq{Path: "/proc/self/fd/0"}, nil},
		{"relative path refused", proto.OpStat, proto.FileReq{Path: "workspace"}, nil},
		{"dotdot refused", proto.OpStat, proto.FileReq{Path: "/workspace/../etc"}, nil},
		{"host shadow absent", proto.OpOpen, proto.FileReq{Path: "/etc/shadow"}, fs.ErrNotExist},
		{"root home closed to the user", proto.OpReadDir, proto.FileReq{Path: "/root"}, fs.ErrPermission},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, f, err := ts.File(ctx, tc.op, tc.req)
			if f != nil {
				_ = f.Close()
			}
			if err == nil {
				t.Fatalf("%s %+v succeeded", tc.op, tc.req)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("%s = %v, want %v", tc.op, err, tc.want)
			}
		})
	}
	// The symlink resolves inside the sandbox: to the synthetic passwd.
	_, f, err = ts.File(ctx, proto.OpOpen, proto.FileReq{Path: "/workspace/link"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	_ = f.Close()
	if !strings.Contains(string(b), "sandbox:x:1000") || strings.Contains(string(b), "daemon:") {
		t.Fatalf("symlink read %q, want the sandbox's own passwd", b)
	}
	if _, _, err := ts.File(ctx, proto.OpRemove, proto.FileReq{Path: "/workspace/a", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ts.ws + "/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("recursive remove left %v", err)
	}
}

func TestInitKillsTreeByGroup(t *testing.T) {
	ts := launch(t, nil)
	sub, err := ts.group.Sub("tree", cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Destroy() }()
	attach, err := sub.OpenThreadAttach()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A double-forked, setsid'ed sleeper escapes the process group and
	// the session, but not the execution's cgroup.
	p, err := ts.Spawn(ctx, proto.SpawnReq{
		Argv: []string{"sh", "-c", "setsid sh -c 'sleep 300 & sleep 300' & echo started; wait"},
		Env:  []string{"PATH=/usr/bin:/bin"}, Cwd: "/workspace",
	}, attach, ts.home)
	for _, f := range attach {
		_ = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	buf := make([]byte, 8)
	if _, err := io.ReadFull(p.Stdout, buf[:8]); err != nil {
		t.Fatal(err)
	}
	// sh, the setsid'ed sh and its two sleeps: wait (bounded) until all
	// four have started.
	var procs []int
	for range 500 {
		if procs, _ = sub.Procs(); len(procs) >= 4 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(procs) < 4 {
		t.Fatalf("execution group holds %v, want the whole tree", procs)
	}
	if err := sub.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the tree was killed")
	}
	if procs, _ := sub.Procs(); len(procs) != 0 {
		t.Fatalf("left %v", procs)
	}
	if err := ts.Ping(ctx); err != nil {
		t.Fatalf("init died with the execution: %v", err)
	}
}
