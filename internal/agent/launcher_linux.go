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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/launcher"
)

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
		exe = "/proc/self/fd/" + strconv.Itoa(launcher.FDExe)
	}
	cmd := exec.Command(exe, args...) //nolint:gosec // G204: the init program (or a test binary), never client input
	cmd.Args[0] = launcher.Name
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
func (l *Launcher) start(ctx context.Context, req launcher.Request, files []*os.File) (int, int, error) {
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

func (l *Launcher) roundTrip(ctx context.Context, req launcher.Request, files []*os.File) (int, int, error) {
	c := l.cur.conn
	b, err := json.Marshal(req)
	if err != nil {
		return 0, -1, fmt.Errorf("launch request: %w", err)
	}
	nums := make([]int, len(files))
	for i, f := range files {
		nums[i] = int(f.Fd())
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(launcherTimeout)
	}
	_ = c.SetDeadline(deadline)
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, _, err := c.WriteMsgUnix(b, unix.UnixRights(nums...), nil); err != nil {
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
	got, ferr := launcher.Rights(oob[:oobn])
	if n == 0 {
		closeFDs(got)
		return 0, -1, fmt.Errorf("launcher answer: %w", errLauncherEnded)
	}
	var rep launcher.Reply
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

func closeFDs(nums []int) {
	for _, fd := range nums {
		fds.Close(fd)
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
		fds.Close(pidfd)
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
