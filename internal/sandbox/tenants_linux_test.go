package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/outbuf"
)

// Cross-tenant starvation: for every kernel resource counted per user or
// host-wide rather than per cgroup, sandbox A takes all it can and
// sandbox B and the server (this process, host root) are still served.
// SECURITY.md, "Shared kernel resources", says what bounds each.

// hold starts a background command in s that takes what it can of a
// resource, prints one line once it holds it, and keeps it until killed;
// it returns that line.
func hold(t *testing.T, s *Sandbox, script string, args ...string) string {
	t.Helper()
	e, err := s.Exec(context.Background(), ExecRequest{Argv: append([]string{"python3", "-c", script}, args...), Background: true, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Kill(); <-e.Done() })
	for {
		ch, closed := e.Stdout.Wait()
		if text, _ := e.Stdout.Text(); strings.Contains(text, "\n") {
			return strings.TrimSpace(text)
		}
		if closed {
			stderr, _ := e.Stderr.Text()
			t.Fatalf("the holder ended before it held anything: %s", stderr)
		}
		select {
		case <-ch:
		case <-e.Done():
		}
	}
}

// twoTenants makes a manager with two sandboxes, A and B, of two keys.
func twoTenants(t *testing.T, cfg Config) (a, b *Sandbox) {
	t.Helper()
	m := newManager(t, cfg, nil)
	a = create(t, m, Spec{})
	info, err := m.Create(context.Background(), Caller{KeyID: "key-b"}, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = m.Get(Caller{KeyID: "key-b"}, info.ID); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// ptyHog opens terminals until the kernel refuses and prints how many it
// got and the refusal.
const ptyHog = `import os, errno, time
fds = []
while True:
    try:
        fds.append(os.openpty())
    except OSError as e:
        print(len(fds), errno.errorcode[e.errno], flush=True)
        break
time.sleep(600)`

func TestTenantCannotStarveOthersOfPTYs(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxPTYs = 6
	a, b := twoTenants(t, cfg)
	if got := hold(t, a, ptyHog); got != "6 ENOSPC" {
		t.Fatalf("A held %q terminals, want its cap: 6 ENOSPC", got)
	}
	// A's own shell session: 429 with a reason, not a 500.
	_, err := a.Spawn(context.Background(), SpawnSpec{Argv: []string{"/bin/sh"}, TTY: true})
	if !fault.Is(err, fault.RateLimited) || fault.RetryAfterOf(err) == 0 || !strings.Contains(fault.Public(err), "SANDBOX_MAX_PTYS") {
		t.Fatalf("A's terminal at its cap: %v (kind %s), want rate_limited naming SANDBOX_MAX_PTYS", err, fault.KindOf(err))
	}
	// B: a session from the server and a terminal of its own.
	p, err := b.Spawn(context.Background(), SpawnSpec{Argv: []string{"/bin/sh"}, TTY: true})
	if err != nil {
		t.Fatalf("B's terminal while A holds all of its own: %v", err)
	}
	p.Kill()
	<-p.Exited()
	p.Release()
	if r := run(t, b, ExecRequest{Argv: []string{"python3", "-c", "import os; os.openpty(); print('ok')"}}); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("B's own openpty: %+v", r)
	}
	// The server (host root).
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("the server's own terminal: %v", err)
	}
	_ = ptmx.Close()
	_ = tty.Close()
}

// inotifyHog holds inotify instances until the kernel refuses.
const inotifyHog = `import ctypes, errno, time
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while libc.inotify_init1(0o2000000) >= 0:
    n += 1
print(n, errno.errorcode[ctypes.get_errno()], flush=True)
time.sleep(600)`

// inotifyOne makes one inotify instance and watch, as a tenant that did
// not take them all would.
const inotifyOne = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0o2000000)
assert fd >= 0, os.strerror(ctypes.get_errno())
assert libc.inotify_add_watch(fd, b"/tmp", 2) >= 0, os.strerror(ctypes.get_errno())
print("ok")`

// TestTenantCannotStarveOthersOfInotifyInstances: the instances are
// counted per user up to the user namespace's owner. Owned by host root,
// A's 128 were root's too: the server's and B's inotify_init1 got EMFILE.
// Owned by A's own host uid, A has exactly its 128 and everyone else theirs.
func TestTenantCannotStarveOthersOfInotifyInstances(t *testing.T) {
	a, b := twoTenants(t, testConfig(t))
	// All 128 of its own, less any that processes of another test binary
	// on this host hold under the same host uid (test managers all count
	// slots from 0: SECURITY.md's "two servers on one host" limit).
	got := hold(t, a, inotifyHog)
	var held int
	if _, err := fmt.Sscanf(got, "%d EMFILE", &held); err != nil || held < agent.DefaultInotifyInstances/2 || held > agent.DefaultInotifyInstances {
		t.Fatalf("A held %q inotify instances, want about all of its own %d, then EMFILE", got, agent.DefaultInotifyInstances)
	}
	if r := run(t, b, ExecRequest{Argv: []string{"python3", "-c", inotifyOne}}); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("B's inotify while A holds all of its own: %+v", r)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("the server's inotify while A holds all of its own: %v", err)
	}
	_ = unix.Close(fd)
	requireOwnOwners(t, a, b)
}

// watchHog adds watches on files of its own until the kernel refuses.
const watchHog = `import ctypes, errno, os, tempfile, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0o2000000)
d = tempfile.mkdtemp()
n = 0
while True:
    p = os.path.join(d, str(n))
    open(p, "w").close()
    if libc.inotify_add_watch(fd, p.encode(), 2) < 0:
        break
    n += 1
print(n, errno.errorcode[ctypes.get_errno()], flush=True)
time.sleep(600)`

// TestTenantCannotStarveOthersOfInotifyWatches: A adds watches up to its
// namespace's user/max_inotify_watches (lowered here to keep the test
// short); B and the server add theirs.
func TestTenantCannotStarveOthersOfInotifyWatches(t *testing.T) {
	cfg := testConfig(t)
	cfg.KernelLimits.InotifyWatches = 1500
	a, b := twoTenants(t, cfg)
	if got := hold(t, a, watchHog); got != "1500 ENOSPC" {
		t.Fatalf("A held %q inotify watches, want all of its own: 1500 ENOSPC", got)
	}
	if r := run(t, b, ExecRequest{Argv: []string{"python3", "-c", inotifyOne}}); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("B's inotify watch while A holds all of its own: %+v", r)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Close(fd) }()
	if _, err := unix.InotifyAddWatch(fd, t.TempDir(), unix.IN_MODIFY); err != nil {
		t.Fatalf("the server's inotify watch while A holds all of its own: %v", err)
	}
	requireOwnOwners(t, a, b)
}

// sigqueueHog queues real-time signals to itself (blocked, so they stay
// queued) until the kernel refuses; with one argument it queues that many
// and says ok.
const sigqueueHog = `import ctypes, errno, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
sig = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
want = int(sys.argv[1]) if len(sys.argv) > 1 else None
n = 0
while want is None or n < want:
    if libc.sigqueue(os.getpid(), sig, ctypes.c_void_p(0)) != 0:
        break
    n += 1
if want is not None:
    print("ok" if n == want else "%d %s" % (n, errno.errorcode[ctypes.get_errno()]))
    sys.exit(0)
print(n, errno.errorcode[ctypes.get_errno()], flush=True)
time.sleep(600)`

// TestTenantCannotStarveOthersOfQueuedSignals: queued signals count per
// user up to the namespace's owner against RLIMIT_SIGPENDING. Unbounded,
// A queued the host's whole limit (96,368 here) and the server's and B's
// rt_sigqueueinfo got EAGAIN; now A stops at its own hard rlimit.
func TestTenantCannotStarveOthersOfQueuedSignals(t *testing.T) {
	a, b := twoTenants(t, testConfig(t))
	if got := hold(t, a, sigqueueHog); got != fmt.Sprint(agent.DefaultSigPending, " EAGAIN") {
		t.Fatalf("A queued %q signals, want all of its own: %d EAGAIN", got, agent.DefaultSigPending)
	}
	if r := run(t, b, ExecRequest{Argv: []string{"python3", "-c", sigqueueHog, "100"}}); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("B's queued signals while A holds all of its own: %+v", r)
	}
	// Host root: a process of the server's, outside any sandbox.
	out, err := exec.Command("python3", "-c", sigqueueHog, "100").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("host root's queued signals while A holds all of its own: %v %s", err, out)
	}
	requireOwnOwners(t, a, b)
}

// requireOwnOwners checks, from the host, that each sandbox's user
// namespace is owned by a host uid of its own, neither root nor the
// other's: the owner every per-user count is charged to.
func requireOwnOwners(t *testing.T, sbs ...*Sandbox) {
	t.Helper()
	seen := map[uint32]bool{}
	for _, s := range sbs {
		s.mu.Lock()
		inst := s.inst
		s.mu.Unlock()
		if inst == nil {
			t.Fatal("sandbox not running")
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", inst.Pid))
		if err != nil {
			t.Fatal(err)
		}
		var uid uint32
		_, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))) //nolint:gosec // G103: the ioctl writes one uint32
		_ = f.Close()
		if e != 0 {
			t.Fatal(e)
		}
		if uid < idBase || seen[uid] {
			t.Fatalf("sandbox %s's user namespace is owned by host uid %d, want one of its own in its range", s.rec.ID, uid)
		}
		seen[uid] = true
	}
}

// nsGetOwnerUID is NS_GET_OWNER_UID (linux/nsfs.h).
const nsGetOwnerUID = 0xb704

// TestTenantCannotStarveOthersOfKeptOutput: A's commands print until its
// share of the output budget is spent; its own oldest finished output is
// evicted (a read of it answers 410), B's stays whole, and the server
// keeps no more than the budget.
func TestTenantCannotStarveOthersOfKeptOutput(t *testing.T) {
	const total, perKey = 3 << 20, 1 << 20
	cfg := testConfig(t)
	budget := outbuf.NewBudget(total, perKey)
	cfg.OutputBudget = budget
	a, b := twoTenants(t, cfg)
	printer := func(s *Sandbox, c string, n int) *Execution {
		t.Helper()
		e, err := s.Exec(context.Background(), ExecRequest{Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' %s >&2", n, c), OutputLimit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		<-e.Done()
		if got := e.Stderr.Total(); got != int64(n) {
			t.Fatalf("printed %d bytes, want %d", got, n)
		}
		return e
	}
	eb := printer(b, "b", 300_000)
	var as []*Execution
	for range 12 {
		as = append(as, printer(a, "a", 400_000))
		all, ofA := budget.Used("key-a")
		if ofA > perKey || all > total {
			t.Fatalf("kept %d bytes for A and %d in all, over %d and %d", ofA, all, perKey, total)
		}
	}
	if budget.Evictions() == 0 || !as[0].Stderr.Evicted() {
		t.Fatal("A printed 4.8 MB past its 1 MiB share and nothing was evicted")
	}
	err := as[0].OutputGone(0, 0)
	if !fault.Is(err, fault.Gone) {
		t.Fatalf("reading A's evicted output: %v, want gone", err)
	}
	if last := as[len(as)-1]; last.OutputGone(0, 0) != nil || len(last.Result().Stderr) != 400_000 {
		t.Fatal("A's latest output is not kept whole")
	}
	if eb.OutputGone(0, 0) != nil || eb.Result().Stderr != strings.Repeat("b", 300_000) {
		t.Fatal("B's output was evicted for A's")
	}
	// A new command of B's still keeps all it prints.
	if e := printer(b, "c", 500_000); e.Result().Stderr != strings.Repeat("c", 500_000) {
		t.Fatal("B's new output is not kept whole")
	}
}

// tcpPort is the loopback port the socket tests' sandboxes may use
// (landlock opens only the listed ports).
const tcpPort = 18089

// tcpHog opens connections to a listener it never reads from and queues
// bytes on each until the kernel refuses more, then prints the total.
const tcpHog = `import socket, sys, time
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(512)
total, conns = 0, []
for _ in range(200):
    c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s, _ = srv.accept()
    c.setblocking(False)
    conns.append((c, s))
    try:
        while True:
            total += c.send(b"x" * 65536)
    except OSError:
        pass
print(total, flush=True)
time.sleep(600)`

// tcpEcho sends n bytes over a fresh loopback connection and reads them
// back.
const tcpEcho = `import socket, sys, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(1)
n = int(sys.argv[2])
def echo():
    s, _ = srv.accept()
    got = 0
    while got < n:
        b = s.recv(65536)
        got += len(b)
        s.sendall(b)
threading.Thread(target=echo, daemon=True).start()
c = socket.create_connection(("127.0.0.1", srv.getsockname()[1]))
threading.Thread(target=lambda: c.sendall(b"y" * n), daemon=True).start()
back = 0
while back < n:
    back += len(c.recv(65536))
print("ok")`

// TestTenantCannotStarveOthersOfTCPBuffers: A queues bytes on 200
// loopback connections nobody reads; its socket buffers are charged to
// its memory cgroup (v2: memory.current; v1: memory.kmem.tcp, limited to
// its memory limit), so it holds about its memory limit of them, not the
// hundreds of megabytes the host's tcp_mem would let it, and B and the
// server still move bytes over TCP.
func TestTenantCannotStarveOthersOfTCPBuffers(t *testing.T) {
	const limit = 64 << 20
	cfg := testConfig(t)
	cfg.Default.MemoryBytes = limit
	cfg.LoopbackPorts = []uint16{tcpPort, tcpPort + 1}
	a, b := twoTenants(t, cfg)
	got := hold(t, a, tcpHog, fmt.Sprint(tcpPort))
	queued, err := strconv.ParseInt(got, 10, 64)
	if err != nil {
		t.Fatalf("A's hog printed %q", got)
	}
	// Unbounded, 200 connections queue several MB each (the host's
	// tcp_wmem and tcp_rmem maxima); bounded, about the limit plus each
	// socket's guaranteed minimum.
	if queued > 2*limit {
		t.Fatalf("A queued %d bytes on TCP sockets, over twice its %d byte memory limit", queued, limit)
	}
	if r := run(t, b, ExecRequest{Argv: []string{"python3", "-c", tcpEcho, fmt.Sprint(tcpPort + 1), "4000000"}}); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("B's TCP while A holds all it may: %+v", r)
	}
	out, err := exec.Command("python3", "-c", tcpEcho, "0", "4000000").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("the server's TCP while A holds all it may: %v %s", err, out)
	}
	t.Logf("A queued %d bytes on 200 connections (memory limit %d)", queued, limit)
}

// udpHog fills UDP receive queues nobody reads: enough sockets to hold
// four times limit (argv[1]) at the receive buffer the kernel grants, each
// sent enough datagrams to fill it; it prints the bytes queued in all
// (rx_queue of the sandbox's own /proc/net/udp).
const udpHog = `import math, socket, time
limit = int(__import__("sys").argv[1])
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
probe.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
rcvbuf = probe.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
n = min(900, math.ceil(4 * limit / rcvbuf))
rx = []
for _ in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.bind(("127.0.0.1", 0))
    rx.append(s)
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload = b"u" * 60000
for s in rx:
    for _ in range(rcvbuf // len(payload) + 2):
        try:
            tx.sendto(payload, s.getsockname())
        except OSError:
            pass
total = 0
with open("/proc/net/udp") as f:
    for line in list(f)[1:]:
        total += int(line.split()[4].split(":")[1], 16)
print(total, flush=True)
time.sleep(600)`

// udpEcho sends 100 datagrams to itself and reads them back.
const udpEcho = `import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.settimeout(10)
for i in range(100):
    s.sendto(b"%d" % i, s.getsockname())
    assert s.recv(100) == b"%d" % i
print("ok")`

// TestTenantCannotStarveOthersOfUDPBuffers: on cgroup v2 a sandbox's UDP
// receive queues are charged to its memory cgroup, so A holds about its
// memory limit of them, not the host's udp_mem (near whose limits every
// UDP socket on the host is throttled), and B and the server still
// exchange datagrams. Cgroup v1 cannot charge UDP buffers to a sandbox
// (the "socket memory" row of sandhold doctor says so): the test runs
// where the memory controller is on v2 (the Helm chart's nodes).
func TestTenantCannotStarveOthersOfUDPBuffers(t *testing.T) {
	const limit = 64 << 20
	cfg := testConfig(t)
	cfg.Default.MemoryBytes = limit
	a, b := twoTenants(t, cfg)
	if a.m.cg.Info().Version != 2 {
		t.Skip("cgroup v1: UDP socket buffers are charged to no sandbox on v1 (SECURITY.md, \"Shared kernel resources\"); this host's memory controller is not on v2")
	}
	got := hold(t, a, udpHog, fmt.Sprint(limit))
	queued, err := strconv.ParseInt(got, 10, 64)
	if err != nil {
		t.Fatalf("A's hog printed %q", got)
	}
	if queued > 2*limit {
		t.Fatalf("A queued %d bytes in UDP receive queues, over twice its %d byte memory limit", queued, limit)
	}
	if r := run(t, b, ExecRequest{Argv: []string{"python3", "-c", udpEcho}}); strings.TrimSpace(r.Stdout) != "ok" {
		t.Fatalf("B's UDP while A holds all it may: %+v", r)
	}
	out, err := exec.Command("python3", "-c", udpEcho).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("the server's UDP while A holds all it may: %v %s", err, out)
	}
	t.Logf("A queued %d bytes of UDP (memory limit %d)", queued, limit)
}
