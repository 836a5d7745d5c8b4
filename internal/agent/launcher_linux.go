package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/archive/spec"
)

// The launcher.
//
// Why it exists: an init is started in a new user namespace, so Go's
// fork/exec cannot share the parent's memory (CLONE_VM|CLONE_VFORK): the
// parent writes the id maps while the child waits. Done by the server,
// every cold create copied the whole server's page tables under its mm
// lock, and every page either side wrote afterwards faulted again. The
// launcher is a small process (the init program in another mode, started
// once) that does that clone instead; copying its few pages is cheap.
//
// Supervision stays with the server: the launcher clones with
// CLONE_PARENT, so each init is the server's child (its real parent is the
// one server thread that started the launcher), the server reaps it and
// sees its exit status, and the init's Pdeathsig fires when that thread —
// or the server — ends. The thread is locked for the launcher's life and
// only ends when the launcher is closed, so it never ends by accident. The
// launcher itself dies with the server (its own Pdeathsig) and is started
// again on the next launch if it died. Only the server can talk to it: its
// one socket is inherited, it has no path. It keeps no descriptor of a
// sandbox once the launch is answered.
//
// A launch that fails after the clone (the child's exec failed, the
// launcher died mid-request) would leave an exited child the server never
// learned about; after every failed launch the server kills and reaps each
// child of its launcher thread that is neither a launcher nor a known init
// (sweep), so no zombie or stray init outlives a failure.

// LauncherName is argv[0] of the launcher process; Entry tells the
// launcher from an init by it.
const LauncherName = "sandhold-launcher"

// fdLauncherConn is the launcher's socket to the server; fdLauncherExe its
// own program when it runs from a memfd (closed at once).
const (
	fdLauncherConn = 3
	fdLauncherExe  = 4
)

// Caps of the launcher protocol.
const (
	// maxLaunchRequest bounds one request: argv and env of an init are a
	// few short strings.
	maxLaunchRequest = 16 << 10
	// maxLaunchFiles is the most descriptors one request carries: the
	// init's socket, stderr, the program, the cgroup. (The workspace goes
	// to the init with its setup request.)
	maxLaunchFiles = 4
)

// Entry runs the launcher when the process was started as one (argv[0]
// LauncherName), else the init (Main). The programs that can serve as an
// init call it.
func Entry() error {
	if filepath.Base(os.Args[0]) == LauncherName {
		return ServeLauncher()
	}
	if len(os.Args) > 0 && os.Args[0] == spec.ChildName {
		// The extractor, run by an init from a binary that links package
		// archive (the server or a test binary in place of
		// cmd/sandhold-archive); the lean init has no spec.Child.
		if spec.Child == nil {
			return errors.New("this program carries no extractor")
		}
		os.Exit(spec.Child())
	}
	return Main()
}

// launchRequest asks the launcher for one init. The descriptors come with
// it, in this order: the init's socket end, then stderr, the program and
// the cgroup directory when the flags say so.
type launchRequest struct {
	// Path is the program to execute when it is not a descriptor.
	Path        string   `json:"path,omitempty"`
	Argv        []string `json:"argv"`
	Env         []string `json:"env"`
	HostUID     uint32   `json:"host_uid"`
	HostGID     uint32   `json:"host_gid"`
	HostNetwork bool     `json:"host_network,omitempty"`
	Stderr      bool     `json:"stderr,omitempty"`
	ExeFile     bool     `json:"exe_file,omitempty"`
	Cgroup      bool     `json:"cgroup,omitempty"`
}

func (r launchRequest) files() int {
	n := 1
	for _, b := range []bool{r.Stderr, r.ExeFile, r.Cgroup} {
		if b {
			n++
		}
	}
	return n
}

// launchReply answers a request: the init's pid (its pidfd rides along),
// or why not.
type launchReply struct {
	Pid int    `json:"pid,omitempty"`
	Err string `json:"err,omitempty"`
}

// ServeLauncher is the launcher's main: it serves launch requests on its
// inherited socket until the server closes it.
func ServeLauncher() error {
	// Only the socket is the launcher's; a memfd it was run from and
	// whatever else the starter left inheritable is closed now.
	if err := closeInherited(fdLauncherConn + 1); err != nil {
		return err
	}
	// Not dumpable: no process of the same uid may ptrace it or read its
	// memory and descriptors through /proc.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("launcher: not dumpable: %w", err)
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("launcher: open /dev/null: %w", err)
	}
	buf := make([]byte, maxLaunchRequest)
	oob := make([]byte, unix.CmsgSpace(maxLaunchFiles*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fdLauncherConn, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("launcher: receive: %w", err)
		}
		if n == 0 && oobn == 0 {
			return nil // the server closed its end
		}
		fds, ferr := rightsOf(oob[:oobn])
		var rep launchReply
		pidfd := -1
		if ferr != nil {
			rep.Err = ferr.Error()
		} else {
			rep, pidfd = serveLaunch(buf[:n], fds, null)
		}
		for _, fd := range fds {
			closeFD(fd)
		}
		if err := sendReply(rep, pidfd); err != nil {
			return err
		}
	}
}

// rightsOf returns the descriptors of a control message.
func rightsOf(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func sendReply(rep launchReply, pidfd int) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("launcher: encode reply: %w", err)
	}
	var oob []byte
	if pidfd >= 0 {
		oob = unix.UnixRights(pidfd)
		defer closeFD(pidfd)
	}
	for {
		err = unix.Sendmsg(fdLauncherConn, b, oob, nil, 0)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("launcher: send: %w", err)
	}
	return nil
}

// serveLaunch clones one init as Launch does, but as the server's child.
// It returns the pid and a pidfd of the init, or an error in the reply
// (no host path in it: the server's client sees only that the start
// failed, the operator the reply in the log).
func serveLaunch(b []byte, fds []int, null int) (launchReply, int) {
	var req launchRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return launchReply{Err: "bad request"}, -1
	}
	if len(fds) != req.files() {
		return launchReply{Err: fmt.Sprintf("request carries %d descriptors, want %d", len(fds), req.files())}, -1
	}
	if len(req.Argv) == 0 || (req.Path == "") == !req.ExeFile {
		return launchReply{Err: "request names no program"}, -1
	}
	if req.HostUID < IDRange || req.HostGID < IDRange {
		// A sandbox's range never starts among the host's own accounts:
		// uid 0 inside would be one of them outside.
		return launchReply{Err: "host id range overlaps the host's accounts"}, -1
	}
	sock, rest := fds[0], fds[1:]
	stderr := null
	if req.Stderr {
		stderr, rest = rest[0], rest[1:]
	}
	files := []uintptr{uintptr(null), uintptr(null), uintptr(stderr), uintptr(sock)} //nolint:gosec // G115: descriptors are small and non-negative
	path := req.Path
	if req.ExeFile {
		// Descriptor 4 is closed in the child (-1); the program is 5.
		files = append(files, ^uintptr(0), uintptr(rest[0])) //nolint:gosec // G115: as above
		rest = rest[1:]
		path = "/proc/self/fd/" + strconv.Itoa(fdExeFile)
	}
	pidfd := -1
	sys := initSysProcAttr(req.HostUID, req.HostGID, req.HostNetwork)
	// The init is the server's child, not the launcher's: the server
	// reaps it, and its Pdeathsig follows the server.
	sys.Cloneflags |= unix.CLONE_PARENT
	sys.PidFD = &pidfd
	if req.Cgroup {
		sys.UseCgroupFD = true
		sys.CgroupFD = rest[0]
	}
	var pid int
	err := asOwner(req.HostUID, req.HostGID, func() error {
		var err error
		pid, err = syscall.ForkExec(path, req.Argv, &syscall.ProcAttr{Dir: "/", Env: req.Env, Files: files, Sys: sys}) //nolint:gosec // G204: the init program the server named over its own inherited socket, never client input
		return err
	})
	if err != nil {
		return launchReply{Err: "clone and exec the init: " + errnoText(err)}, -1
	}
	if pidfd < 0 {
		// CLONE_PIDFD is there on every kernel with clone3 (5.3); without
		// a pidfd the server could not supervise the init safely.
		_ = unix.Kill(pid, unix.SIGKILL)
		return launchReply{Err: "no pidfd for the init"}, -1
	}
	return launchReply{Pid: pid}, pidfd
}

// errnoText is an error's errno text, never a path.
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "failed"
}

// initSysProcAttr is how every init is cloned: all namespaces but the
// cgroup one (the init makes that itself once it sits in its group), its
// id maps, root of the new user namespace, its own session, killed with
// its parent. The clone runs as the sandbox's own host uid (asOwner),
// which then owns the user namespace.
func initSysProcAttr(hostUID, hostGID uint32, hostNetwork bool) *syscall.SysProcAttr {
	var netns uintptr = unix.CLONE_NEWNET
	if hostNetwork {
		netns = 0
	}
	return &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
			unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | netns,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(hostUID), Size: IDRange}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(hostGID), Size: IDRange}},
		GidMappingsEnableSetgroups: true,
		// Become the namespace's root: without this the init keeps host
		// uid 0, which is unmapped inside, and has no capabilities there.
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
		Setsid:     true,
		// If the server dies, its sandboxes die with it (and the pid
		// namespace takes every process inside along); a restarted server
		// reaps their cgroups and starts them again on demand.
		Pdeathsig: syscall.SIGKILL,
	}
}

// LauncherSpec says how to start the launcher: the same program as the
// inits (LaunchSpec's Exe, ExeFile and Args).
type LauncherSpec struct {
	Exe     string
	ExeFile *os.File
	Args    []string
	// Log receives the launcher's stderr; nil discards it.
	Log io.Writer
}

// Launcher is the server's side of the launcher process. Launches through
// it are serialized (the clone is serial in the kernel anyway); the
// server's setup of each init runs in parallel.
type Launcher struct {
	spec  LauncherSpec
	calls chan func()
	tid   int

	// mu serializes launches, restarts and sweeps; it guards cur and
	// closed.
	mu     sync.Mutex
	cur    *launcherProc
	closed bool

	// omu guards ours: the children of the launcher thread that a sweep
	// must leave alone (launchers and inits, until they are reaped).
	omu  sync.Mutex
	ours map[int]struct{}

	// starts counts launcher processes started (tests).
	starts int
}

// launcherProc is one launcher process.
type launcherProc struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	dead chan struct{}
}

// StartLauncher starts the launcher on a thread of its own that lives
// until Close. It fails if the launcher does not start or the host cannot
// list the thread's children (then a failed launch could leak one).
func StartLauncher(spec LauncherSpec) (*Launcher, error) {
	l := &Launcher{spec: spec, calls: make(chan func()), ours: map[int]struct{}{}}
	tid := make(chan int)
	go l.thread(tid)
	l.tid = <-tid
	if _, err := l.children(); err != nil {
		l.stopThread()
		return nil, fmt.Errorf("launcher: list the launcher thread's children: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.restartLocked(); err != nil {
		l.closed = true
		l.stopThread()
		return nil, err
	}
	return l, nil
}

// thread runs every start of a launcher process. It keeps its OS thread
// locked and never unlocks it: the thread is the real parent of the
// launcher and of every init, and a thread's exit fires their Pdeathsig.
// When Close ends this goroutine the runtime ends the thread, and with it
// whatever the launcher started that is still alive.
func (l *Launcher) thread(tid chan<- int) {
	runtime.LockOSThread()
	tid <- unix.Gettid()
	for f := range l.calls {
		f()
	}
}

func (l *Launcher) stopThread() { close(l.calls) }

// onThread runs f on the launcher thread.
func (l *Launcher) onThread(f func()) {
	done := make(chan struct{})
	l.calls <- func() { f(); close(done) }
	<-done
}

// restartLocked starts a launcher process, ending the old one if any.
// l.mu is held.
func (l *Launcher) restartLocked() error {
	l.dropLocked()
	var p *launcherProc
	var err error
	l.onThread(func() { p, err = l.spawn() })
	if err != nil {
		return err
	}
	l.cur = p
	l.starts++
	return nil
}

// spawn starts one launcher process; it runs on the launcher thread.
func (l *Launcher) spawn() (*launcherProc, error) {
	srv, child, err := Socketpair()
	if err != nil {
		return nil, err
	}
	defer func() { _ = child.Close() }()
	exe, args := l.spec.Exe, l.spec.Args
	if exe == "" {
		exe = "/proc/self/exe"
	}
	if args == nil {
		args = []string{"init"}
	}
	if l.spec.ExeFile != nil {
		exe = "/proc/self/fd/" + strconv.Itoa(fdLauncherExe)
	}
	cmd := exec.Command(exe, args...) //nolint:gosec // G204: the init program (or a test binary), never client input
	cmd.Args[0] = LauncherName
	// The server's environment never passes in.
	cmd.Env = []string{"GOMAXPROCS=1", "GOTRACEBACK=none"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{child} // fd 3
	if l.spec.ExeFile != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, l.spec.ExeFile) // fd 4
	}
	if l.spec.Log != nil {
		cmd.Stderr = l.spec.Log
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own session: a terminal's ^C to the server's process group
		// does not reach it; it dies with the server (and with this
		// thread) instead.
		Setsid:    true,
		Pdeathsig: syscall.SIGKILL,
	}
	nc, cerr := net.FileConn(srv)
	_ = srv.Close()
	if cerr != nil {
		return nil, fmt.Errorf("launcher socket: %w", cerr)
	}
	conn, ok := nc.(*net.UnixConn)
	if !ok {
		_ = nc.Close()
		return nil, errors.New("launcher socket: not a unix socket")
	}
	if err := cmd.Start(); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("start launcher: %w", err)
	}
	pid := cmd.Process.Pid
	l.keep(pid)
	p := &launcherProc{cmd: cmd, conn: conn, dead: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		l.forget(pid)
		close(p.dead)
	}()
	return p, nil
}

func (l *Launcher) keep(pid int) {
	l.omu.Lock()
	l.ours[pid] = struct{}{}
	l.omu.Unlock()
}

func (l *Launcher) forget(pid int) {
	l.omu.Lock()
	delete(l.ours, pid)
	l.omu.Unlock()
}

// children lists the pids whose real parent is the launcher thread.
func (l *Launcher) children() ([]int, error) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(l.tid) + "/children")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("children: %q", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// sweepLocked kills and reaps every child of the launcher thread that is
// neither a launcher nor a known init: what a failed launch may have left.
// Each is this process's unreaped child, so its pid cannot be reused
// before the wait. l.mu is held, so no launch is between clone and
// bookkeeping.
func (l *Launcher) sweepLocked() int {
	pids, err := l.children()
	if err != nil {
		return 0
	}
	n := 0
	for _, pid := range pids {
		l.omu.Lock()
		_, ok := l.ours[pid]
		l.omu.Unlock()
		if ok {
			continue
		}
		_ = unix.Kill(pid, unix.SIGKILL)
		for {
			_, err := unix.Wait4(pid, nil, 0, nil)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		n++
	}
	return n
}

// errLauncherGone says the launcher died before it took the request: the
// request can go to a new launcher.
var errLauncherGone = errors.New("launcher gone")

// start has the launcher clone one init. On success the init is the
// server's child, pid its pid and the file its pidfd.
func (l *Launcher) start(ctx context.Context, req launchRequest, files []*os.File) (int, int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, -1, errors.New("launcher closed")
	}
	for attempt := 0; ; attempt++ {
		if l.cur == nil || isClosed(l.cur.dead) {
			if err := l.restartLocked(); err != nil {
				return 0, -1, err
			}
		}
		pid, pidfd, err := l.roundTrip(ctx, req, files)
		if err == nil {
			l.keep(pid)
			return pid, pidfd, nil
		}
		switch {
		case errors.Is(err, errLauncherGone):
			l.dropLocked()
		case errors.Is(err, errLauncherEnded):
			// It died with the request in hand (or just before, its
			// socket still held by a thread on its way out): a clone may
			// have happened, so the child it left is swept before the
			// request goes to a new launcher.
			l.dropLocked()
			l.sweepLocked()
		default:
			// A clone may have happened: end a launcher that broke
			// mid-request, then the child a failed launch left.
			if !errors.Is(err, errLaunchRefused) {
				l.dropLocked()
			}
			l.sweepLocked()
			return 0, -1, err
		}
		if attempt > 0 {
			return 0, -1, err
		}
	}
}

// dropLocked ends the current launcher process and waits for its reap.
// l.mu is held.
func (l *Launcher) dropLocked() {
	p := l.cur
	if p == nil {
		return
	}
	l.cur = nil
	_ = p.conn.Close()
	_ = p.cmd.Process.Kill()
	<-p.dead
}

// errLauncherEnded says the launcher ended without answering a request it
// was sent: the request can go to a new launcher once the server has swept
// what the old one may have cloned.
var errLauncherEnded = errors.New("launcher ended")

// errLaunchRefused marks a launcher's own answer that it could not start
// the init (the launcher is fine).
var errLaunchRefused = errors.New("launcher refused")

func (l *Launcher) roundTrip(ctx context.Context, req launchRequest, files []*os.File) (int, int, error) {
	c := l.cur.conn
	b, err := json.Marshal(req)
	if err != nil {
		return 0, -1, fmt.Errorf("launch request: %w", err)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(launcherTimeout)
	}
	_ = c.SetDeadline(deadline)
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, _, err := c.WriteMsgUnix(b, unix.UnixRights(fds...), nil); err != nil {
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
			return 0, -1, fmt.Errorf("%w: %w", errLauncherGone, err)
		}
		return 0, -1, fmt.Errorf("send to launcher: %w", err)
	}
	runtime.KeepAlive(files)
	buf := make([]byte, 1024)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if errors.Is(err, unix.ECONNRESET) || errors.Is(err, io.EOF) {
		return 0, -1, fmt.Errorf("launcher answer: %w: %w", errLauncherEnded, err)
	}
	if err != nil {
		return 0, -1, fmt.Errorf("launcher answer: %w", err)
	}
	got, ferr := rightsOf(oob[:oobn])
	if n == 0 {
		closeFDs(got)
		return 0, -1, fmt.Errorf("launcher answer: %w", errLauncherEnded)
	}
	var rep launchReply
	if err := json.Unmarshal(buf[:n], &rep); err != nil {
		closeFDs(got)
		return 0, -1, fmt.Errorf("launcher answer: %w", err)
	}
	if rep.Err != "" {
		closeFDs(got)
		return 0, -1, fmt.Errorf("%w: %s", errLaunchRefused, rep.Err)
	}
	if ferr != nil || len(got) != 1 || rep.Pid <= 0 {
		closeFDs(got)
		return 0, -1, errors.New("launcher answer: no pidfd")
	}
	return rep.Pid, got[0], nil
}

// launcherTimeout bounds a launch with no deadline of its own.
const launcherTimeout = 30 * time.Second

func closeFDs(fds []int) {
	for _, fd := range fds {
		closeFD(fd)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Pid is the running launcher's pid, 0 if none (tests, the posture).
func (l *Launcher) Pid() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil || isClosed(l.cur.dead) {
		return 0
	}
	return l.cur.cmd.Process.Pid
}

// Close ends the launcher and its thread; inits it started that are still
// alive die with the thread (their Pdeathsig), so close the sandboxes
// first.
func (l *Launcher) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.dropLocked()
	l.stopThread()
	return nil
}

// pidfdWaiter supervises an init through its pidfd: the wait parks on the
// runtime's poller (a pidfd is readable once its process exited), so an
// idle sandbox holds no thread blocked in wait.
type pidfdWaiter struct {
	f   *os.File
	pid int
}

// newPidfdWaiter takes over pidfd.
func newPidfdWaiter(pidfd, pid int) (*pidfdWaiter, error) {
	if err := unix.SetNonblock(pidfd, true); err != nil {
		closeFD(pidfd)
		return nil, fmt.Errorf("pidfd: %w", err)
	}
	// A File made from a non-blocking descriptor is registered with the
	// poller.
	return &pidfdWaiter{f: os.NewFile(uintptr(pidfd), "pidfd:init"), pid: pid}, nil //nolint:gosec // G115: a descriptor from the kernel
}

// wait blocks until the process exited, reaps it and describes how it
// ended; the pidfd is closed. exited runs between the exit and the reap,
// while the pid cannot yet belong to another process.
func (w *pidfdWaiter) wait(exited func()) string {
	defer func() { _ = w.f.Close() }()
	rc, err := w.f.SyscallConn()
	if err != nil {
		exited()
		return "unknown: " + err.Error()
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		// WNOWAIT: look only; the reap below takes the status.
		werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil) //nolint:gosec // G115: a descriptor
		if errors.Is(werr, unix.EINTR) || errors.Is(werr, unix.EAGAIN) {
			// EAGAIN: a non-blocking pidfd whose process runs on.
			werr = nil
			return false
		}
		if werr != nil {
			return true
		}
		return info.Signo != 0
	})
	exited()
	if err != nil {
		return "unknown: " + err.Error()
	}
	if werr != nil {
		return "unknown: " + werr.Error()
	}
	// The process is this one's unreaped child: its pid is still its own.
	var ws unix.WaitStatus
	for {
		_, err = unix.Wait4(w.pid, &ws, unix.WNOHANG, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return "unknown: " + err.Error()
	}
	return describeExit(ws)
}

// signal sends sig through the pidfd; after the reap it is a no-op.
func (w *pidfdWaiter) signal(sig syscall.Signal) error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) //nolint:gosec // G115: a descriptor
	}); err != nil {
		return err
	}
	return serr
}

func describeExit(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		return "signal: " + ws.Signal().String()
	default:
		return "status " + strconv.Itoa(int(ws))
	}
}
