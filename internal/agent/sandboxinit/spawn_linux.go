package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Caps on what one spawn request may carry; the server enforces tighter
// ones, these keep a confused server from hurting the init.
const (
	maxArgs     = 4096    // argv entries
	maxEnv      = 1024    // environment entries
	maxArgBytes = 1 << 20 // argv + env bytes, below the kernel's ARG_MAX
)

// spawn starts one command. It runs on forkLoop's thread (see there), so
// nothing between the request and its reply hops to another thread.
func (s *server) spawn(id uint64, r *proto.SpawnReq, files []*os.File) (proto.Response, []*os.File, error) {
	if err := checkSpawn(r); err != nil {
		return proto.Response{}, nil, err
	}
	if r.Root && !s.setup.AllowRoot {
		return proto.Response{}, nil, &proto.Error{Code: "EPERM", Msg: "running as root is not enabled for this sandbox"}
	}
	var hold *os.File
	if r.Held {
		if len(files) == 0 {
			return proto.Response{}, nil, proto.Invalidf("a held spawn without its hold")
		}
		hold, files = files[len(files)-1], files[:len(files)-1]
	}
	if r.CgroupFDs < 0 || r.HomeFDs < 0 || r.CgroupFDs+r.HomeFDs > len(files) {
		return proto.Response{}, nil, proto.Invalidf("%d+%d cgroup descriptors announced, %d attached", r.CgroupFDs, r.HomeFDs, len(files))
	}
	if s.setup.CgroupVersion != 2 && r.HomeFDs < r.CgroupFDs {
		// The forking thread could not come back from the execution's
		// groups (see forkLoop): refused before anything moves.
		return proto.Response{}, nil, proto.Invalidf("%d execution cgroup descriptors but only %d to return home", r.CgroupFDs, r.HomeFDs)
	}
	cgroups := files[:r.CgroupFDs]
	home := files[r.CgroupFDs : r.CgroupFDs+r.HomeFDs]
	path, err := lookPath(r.Argv[0], r.Env)
	if err != nil {
		return proto.Response{}, nil, err
	}

	uid, gid := s.setup.UID, s.setup.GID
	if r.Root {
		uid, gid = 0, 0
	}
	attr := &syscall.SysProcAttr{
		Setsid:     true,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
	}

	// The child's ends are plain descriptors (dup2'ed into the child,
	// closed here after the fork); the parent's ends only travel to the
	// server. Neither needs the runtime's poller.
	var childFDs []int
	var parentFiles []*os.File
	defer func() {
		for _, fd := range childFDs {
			if fd != s.devNull {
				fds.Close(fd)
			}
		}
	}()
	if r.TTY {
		ptmx, tty, err := pty.Open()
		if err != nil {
			return proto.Response{}, nil, s.ptyError(err)
		}
		defer func() { _ = tty.Close() }()
		rows, cols := r.Rows, r.Cols
		if rows == 0 || cols == 0 {
			rows, cols = 24, 80
		}
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
			_ = ptmx.Close()
			return proto.Response{}, nil, fmt.Errorf("size pty: %w", err)
		}
		fd := int(tty.Fd())
		attr.Setctty = true
		attr.Ctty = 0
		parentFiles = []*os.File{ptmx}
		return s.forkSpawn(id, path, r, attr, []uintptr{uintptr(fd), uintptr(fd), uintptr(fd)}, parentFiles, cgroups, home, hold)
	}
	if r.Stdin {
		rd, wr, err := pipe()
		if err != nil {
			return proto.Response{}, nil, err
		}
		childFDs = append(childFDs, rd)
		parentFiles = append(parentFiles, serverEnd(wr, "stdin"))
	} else {
		childFDs = append(childFDs, s.devNull)
	}
	for _, name := range [2]string{"stdout", "stderr"} {
		rd, wr, err := pipe()
		if err != nil {
			proto.CloseAll(parentFiles)
			return proto.Response{}, nil, err
		}
		childFDs = append(childFDs, wr)
		parentFiles = append(parentFiles, serverEnd(rd, name))
	}
	if r.DevToolsPipe {
		// Descriptor 3: the process reads what the server writes.
		rd, wr, err := pipe()
		if err != nil {
			proto.CloseAll(parentFiles)
			return proto.Response{}, nil, err
		}
		childFDs = append(childFDs, rd)
		parentFiles = append(parentFiles, serverEnd(wr, "devtools-in"))
		// Descriptor 4: the server reads what the process writes.
		if rd, wr, err = pipe(); err != nil {
			proto.CloseAll(parentFiles)
			return proto.Response{}, nil, err
		}
		childFDs = append(childFDs, wr)
		parentFiles = append(parentFiles, serverEnd(rd, "devtools-out"))
	}
	fds := make([]uintptr, len(childFDs))
	for i, fd := range childFDs {
		fds[i] = uintptr(fd)
	}
	return s.forkSpawn(id, path, r, attr, fds, parentFiles, cgroups, home, hold)
}

// pipe makes a close-on-exec pipe (blocking, as the command expects).
func pipe() (rd, wr int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, fmt.Errorf("pipe: %w", err)
	}
	return p[0], p[1], nil
}

// serverEnd wraps the server's end of a command's pipe and makes it
// non-blocking. The two ends of a pipe are separate open files, so the
// command's end stays blocking; the server's arrives with O_NONBLOCK and
// its runtime serves it from the poller: a copy waiting for output parks a
// goroutine instead of holding a thread (and a P) in read(2) for the
// command's whole life, which also kept the server's sysmon polling, and
// closing the file wakes a copy that waits. The flag is set after the
// wrapping, so this process's runtime neither polls the descriptor nor
// (in Send's Fd) turns it back to blocking. Should the flag not take, the
// server reads it blocking, as before. The pipe was made here without any
// status flag (pipe2 with O_CLOEXEC only, a descriptor flag), so the flags
// are set outright, with no F_GETFL first: one fcntl per end, not two.
func serverEnd(fd int, name string) *os.File {
	f := os.NewFile(uintptr(fd), name)
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_NONBLOCK)
	return f
}

// forkSpawn forks the prepared command and answers with its pid and the
// parent's descriptors. A held spawn (hold not nil) waits for its release
// first, on this thread, before it joins the execution's groups. A
// failure to bring the forking thread home after the fork ends forkLoop
// (errThreadLost).
func (s *server) forkSpawn(id uint64, path string, r *proto.SpawnReq, attr *syscall.SysProcAttr, fds []uintptr,
	parentFiles []*os.File, cgroups, home []*os.File, hold *os.File) (proto.Response, []*os.File, error) {
	if hold != nil {
		if err := awaitRelease(hold); err != nil {
			proto.CloseAll(parentFiles)
			return proto.Response{}, nil, err
		}
	}
	proc := &syscall.ProcAttr{Dir: r.Cwd, Env: r.Env, Files: fds, Sys: attr}
	pid, err, homeErr := s.forkInGroup(id, path, r.Argv, proc, cgroups, home)
	if homeErr != nil {
		s.lost = homeErr
	}
	if err != nil {
		proto.CloseAll(parentFiles)
		return proto.Response{}, nil, err
	}
	setLimits(pid, r.Limits)
	return proto.Response{Spawn: &proto.SpawnResp{Pid: pid}}, parentFiles, nil
}

// spawnJob is one spawn request for forkLoop.
type spawnJob struct {
	req   proto.Request
	files []*os.File
	// run, if set, is run instead of the request: the extractor's fork
	// (extract_linux.go), on this thread for the same reasons as a command.
	run func()
}

// forkLoop runs on Main's locked thread, the one in the sandbox's cgroup
// namespace (see enterCgroupNS), and serves every spawn request there —
// checks, pipes, fork, reply — until served delivers the end of the
// protocol loop. Doing the whole request on this thread saves two thread
// hand-offs per command (to a handler goroutine and back). It returns an
// error only when the thread could not leave an execution's group: it
// cannot be replaced, and left there a kill of that group would take the
// init with it, so the init ends (and the sandbox with it) instead.
func (s *server) forkLoop(served <-chan error) error {
	for {
		select {
		case err := <-served:
			return err
		case job := <-s.forks:
			if job.run != nil {
				job.run()
			} else {
				s.handle(job.req, job.files)
			}
			if s.lost != nil {
				return s.lost
			}
		}
	}
}

// forkInGroup forks one command. On cgroup v1 the thread first joins the
// execution's group through the attached "tasks" files, so the child
// starts there, and afterwards returns to the sandbox's own group through
// the home files; homeErr means it could not return.
func (s *server) forkInGroup(id uint64, path string, argv []string, proc *syscall.ProcAttr, cgroups, home []*os.File) (pid int, err, homeErr error) {
	v1 := s.setup.CgroupVersion != 2
	joined := 0
	if v1 {
		for _, f := range cgroups {
			if _, err := unix.Write(int(f.Fd()), thisThread); err != nil {
				return 0, fmt.Errorf("join execution cgroup: %w", err), s.goHome(home, joined)
			}
			joined++
		}
	}
	s.mu.Lock()
	pid, err = syscall.ForkExec(path, argv, proc) //nolint:gosec // G204: running the client's command inside the sandbox is this function's purpose
	if err == nil {
		if id != noReport {
			s.children[pid] = id
		}
		// Wakes a reaper that found no child (reap): every child, the
		// extractor too, must be collected when it ends.
		select {
		case s.forked <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	if err == nil && !v1 {
		// cgroup v2: the attached file is the execution group's
		// cgroup.procs, opened by the server (v2 checks the opener's
		// credentials too). The child is moved right after fork; see the
		// package doc for the window this leaves.
		for _, f := range cgroups {
			if _, werr := unix.Write(int(f.Fd()), []byte(strconv.Itoa(pid))); werr != nil {
				_ = unix.Kill(pid, unix.SIGKILL)
				err = fmt.Errorf("join execution cgroup: %w", werr)
			}
		}
	}
	// Back home before the reply leaves: once the server knows the
	// process, it may kill the execution's group, and the init's thread
	// must not be in it then.
	return pid, err, s.goHome(home, joined)
}

// noReport is the request id of a child whose exit is not reported (the
// extractor: its caller reads its reply instead); request ids start at 1.
const noReport = 0

// thisThread is what a v1 "tasks" write names to move the writing thread
// itself: "0" is the calling thread, looked up without a pid (and, on
// kernels since 5.18, moved without the global threadgroup lock a write of
// a tid takes).
var thisThread = []byte("0")

// goHome moves the forking thread back to the sandbox's own groups after
// it joined an execution's groups (joined of them, cgroup v1).
func (s *server) goHome(home []*os.File, joined int) error {
	if joined == 0 {
		return nil
	}
	if len(home) < joined {
		return fmt.Errorf("return to the sandbox's cgroups: %d home files for %d groups", len(home), joined)
	}
	for _, f := range home {
		if _, err := unix.Write(int(f.Fd()), thisThread); err != nil {
			return fmt.Errorf("return to the sandbox's cgroups: %w", err)
		}
	}
	return nil
}

// setLimits applies per-execution rlimits. Go cannot run code between fork
// and exec, so they are set right after exec returns (the fork is a vfork:
// the program has been exec'd, its dynamic loader is starting). CPU time is
// counted from the start either way; file size and open files are enforced
// from here on, with the workspace quota and the execution's cgroup as the
// hard limits behind them.
func setLimits(pid int, l proto.Limits) {
	set := func(res int, v uint64) {
		if v == 0 {
			return
		}
		lim := unix.Rlimit{Cur: v, Max: v}
		_ = unix.Prlimit(pid, res, &lim, nil)
	}
	if l.CPUSeconds > 0 {
		// SIGXCPU at the soft limit, SIGKILL one second later.
		lim := unix.Rlimit{Cur: l.CPUSeconds, Max: l.CPUSeconds + 1}
		_ = unix.Prlimit(pid, unix.RLIMIT_CPU, &lim, nil)
	}
	set(unix.RLIMIT_FSIZE, l.FileSizeBytes)
	set(unix.RLIMIT_NOFILE, l.OpenFiles)
}

func checkSpawn(r *proto.SpawnReq) error {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return proto.Invalidf("argv is empty")
	}
	if len(r.Argv) > maxArgs || len(r.Env) > maxEnv {
		return proto.Invalidf("too many arguments or environment entries")
	}
	total := 0
	for _, a := range r.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return proto.Invalidf("argv holds a NUL byte")
		}
		total += len(a)
	}
	for _, e := range r.Env {
		if strings.IndexByte(e, 0) >= 0 || !strings.Contains(e, "=") || strings.HasPrefix(e, "=") {
			return proto.Invalidf("malformed environment entry")
		}
		total += len(e)
	}
	if total > maxArgBytes {
		return proto.Invalidf("argv and environment exceed %d bytes", maxArgBytes)
	}
	if !filepath.IsAbs(r.Cwd) || strings.IndexByte(r.Cwd, 0) >= 0 {
		return proto.Invalidf("cwd must be an absolute path")
	}
	if r.DevToolsPipe && r.TTY {
		return proto.Invalidf("a DevTools pipe is not given to a terminal's process")
	}
	return nil
}

// lookPath finds argv[0] with the PATH of the request's environment, never
// the init's own.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &proto.Error{Code: "ENOENT", Msg: fmt.Sprintf("%s: command not found", name)}
}

// reap is PID 1's duty: it collects every child that ends — the ones it
// spawned, whose exits it reports, and the orphans the kernel hands it.
//
// It waits in waitid for any child to end, without collecting it
// (WNOWAIT), and then collects under s.mu (reapAll), which fork holds
// until the child is registered. With no child at all (ECHILD) it waits
// for the next fork: orphans are only ever a command's descendants, so
// none can appear before then. No signal is involved: SIGCHLD through
// os/signal took a signal handler, the runtime's signal thread, os/signal's
// goroutine and a channel hop for each exit, and two threads for the
// process's life (threads_linux.go). While a child lives this goroutine
// holds a thread in the kernel; an idle init with no process holds none.
func (s *server) reap() {
	for {
		s.reapAll()
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT|unix.WALL, nil)
		switch {
		case err == nil, errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.ECHILD):
			<-s.forked
		default:
			// Not seen on a kernel this runs on; no busy loop if it is.
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// reapAll collects every child that has ended and reports the exits of
// those the init spawned. reapMu is held for the whole pass, so whoever
// takes it next knows every exit collected before is reported (the
// sleeper, sleepOnce).
func (s *server) reapAll() {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		s.mu.Lock()
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, &ru)
		var id uint64
		var ours bool
		if pid > 0 {
			id, ours = s.children[pid]
			delete(s.children, pid)
		}
		s.mu.Unlock()
		if pid <= 0 || errors.Is(err, unix.ECHILD) {
			return
		}
		if !ours {
			continue
		}
		ex := &proto.Exit{Pid: pid, Code: ws.ExitStatus(), MaxRSS: ru.Maxrss}
		if ws.Signaled() {
			ex.Code = -1
			ex.Signal = int(ws.Signal())
		}
		ex.CPUms = (ru.Utime.Nano() + ru.Stime.Nano()) / 1e6
		_ = s.conn.Send(proto.Response{ID: id, Kind: proto.EventExit, Exit: ex})
	}
}

// ptyError says why no terminal could be opened. ENOSPC from /dev/ptmx
// means the sandbox's devpts is at its max= (CodePTYLimit: the caller's
// own sandbox is full) or the host's pool is empty (CodePTYHost); the
// open terminals are counted in /dev/pts to tell which.
func (s *server) ptyError(err error) error {
	if !errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("open pty: %w", err)
	}
	limit := s.setup.PTYLimit()
	if openPTYs() >= limit {
		return &proto.Error{Code: proto.CodePTYLimit, Msg: fmt.Sprintf("all %d terminals of the sandbox are open", limit)}
	}
	return &proto.Error{Code: proto.CodePTYHost, Msg: "the host's terminal pool is exhausted (kernel.pty.max)"}
}

// openPTYs counts the terminals of the sandbox's devpts: /dev/pts holds one
// numbered node per terminal whose master is open, beside ptmx.
func openPTYs() int {
	ents, err := os.ReadDir("/dev/pts")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}
