package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/caps"
)

// An idle init sleeps in a one-page keeper.
//
// A Go program cannot get much below 2 MB of private memory while it runs
// (runtime metadata, heap, stacks of ~10 threads, their kernel stacks and
// page tables; BENCHMARKS.md "Idle sandbox memory, field by field"), and a
// host runs hundreds of mostly idle sandboxes. So when an init has been
// quiet for its quiet period (Setup.SleepAfterMs, default sleepAfter) with
// nothing to do — no request being served, no spawn queued, no child, no
// process in the sandbox but itself, no egress connection on its way — it
// executes its keeper: the same sealed memfd program, started under the
// name KeeperName, whose ELF entry point (cmd/sandhold-init/keeper_amd64.s)
// runs a few dozen instructions before the Go runtime would: it waits in
// ppoll on the protocol socket (and the egress listener) and, on any event,
// executes the Go init again under ResumeName. The message or connection
// that woke it is still queued; the resumed init reads it. Both programs
// are PID 1 of the sandbox: execve keeps the pid, the namespaces, the
// cgroups, the seccomp filter, no_new_privs and the landlock domain, none
// of which can be undone from inside. The keeper has one thread and a few
// pages of its own (measured in TestIdleInitSleeps).
//
// Capabilities. Commands start with an empty bounding set because the one
// thread that forks them (Main's locked thread, forkLoop) dropped its own
// (caps.DropBoundingSetThread). The init's other threads keep the set the
// init started with, so the exec into the keeper — made from one of them,
// checked before it happens — gives the keeper, and the keeper's exec gives
// the resumed init, the same capabilities of its user namespace the init
// had when it started (a root exec gets bounding ∪ inheritable). An empty
// bounding set on every thread would leave the resumed init unable to run
// commands as the sandbox user. The resumed init drops its forking thread's
// set again before it serves.
//
// The cgroup namespace is per thread, and the exec'ing thread's is the
// one the keeper and the resumed init keep; setup therefore moves every
// thread of an init that can sleep into a namespace rooted at the sandbox's
// group (enterCgroupNS with allThreads), and the resumed init checks its view.

// Names in argv[0] that tell the programs apart (Entry; keeper_amd64.s
// compares KeeperName byte by byte; KeeperName+"+" also polls the egress
// listener on descriptor fdEgressSleep).
const (
	KeeperName = "sandhold-keeper"
	ResumeName = "sandhold-init-resume"
)

// Descriptors across the keeper: the protocol socket stays proto.FDConn and the
// program proto.FDExe, as when the server started the init; the egress
// listener is fdEgressSleep. The resumed init's state (resumeState, in a
// sealed memfd) keeps whatever number above proto.FDExe it has (the Go
// runtime holds descriptors of its own from its start, at numbers that
// depend on what the process inherited), and argv[1] names it.
const fdEgressSleep = 4

// maxResumeState caps the state the resumed init reads (a Setup is a few
// hundred bytes; its port lists are bounded by 65535 entries each).
const maxResumeState = 1 << 20

// sleepAfter is the default quiet period before an idle init sleeps, the
// server's default (SANDBOX_IDLE_SLEEP): short enough that an idle
// sandbox holds under 1 MB within 5 s of its last call (issue 34), long
// enough that a client's back-to-back calls find the init awake. See
// BENCHMARKS.md "An idle init sleeps in a one-page keeper" for the wake's
// cost (≈17 ms of CPU and latency on the first call after a pause).
const sleepAfter = 4 * time.Second

// init keeps an init's main goroutine on the process's first thread: the
// runtime runs package initialisation there, locked, and a lock taken now
// holds into main.main; without it the goroutine may be moved to another
// thread before Main's LockOSThread, under load. Main and resume expect the
// thread they lock to be the thread group leader: its name is the
// process's (ps, /proc/1/status, the tests), and the sleep's exec checks it
// is not on the forking thread by comparing with the pid. Only a sandbox's
// PID 1 (Main refuses to run otherwise).
func init() {
	if os.Getpid() == 1 {
		runtime.LockOSThread()
	}
}

// keeperLinked is set by cmd/sandhold-init when its entry point is the
// keeper (SetKeeper).
var keeperLinked bool

// SetKeeper tells the init whether its program was linked with the keeper
// as its entry point (cmd/sandhold-init, amd64, `make build`). Without one
// an idle init never sleeps; it only returns free memory (idleRelease).
func SetKeeper(linked bool) { keeperLinked = linked }

// sleeper decides when an idle init sleeps and makes it sleep.
type sleeper struct {
	s     *server
	after time.Duration
	// exe is the init's own program (a close-on-exec duplicate of the
	// memfd it was started from).
	exe int
	// bset is the bounding set the init started with: the thread that
	// execs the keeper must hold exactly that.
	bset uint64
	// slack is the forking thread's timer slack at start (ns): the
	// resumed init's forking thread gets it back (commands inherit it).
	slack int

	// last is when the last request was read (Unix ns).
	last  atomic.Int64
	armed atomic.Bool
	// asked is when the init last asked the server for leave to sleep
	// (Unix ns; 0: no question open). One question is open at a time.
	asked atomic.Int64

	// The record of attempts (trySleep), on the protocol loop's goroutine
	// only, handed on across sleeps (resumeState); report (the init's
	// stderr: the server's log) hears of failures.
	record sleepRecord
	report io.Writer
}

// sleepRecord counts an init's attempts to sleep over its whole life (the
// woken init carries on the count of the one that slept).
type sleepRecord struct {
	// Attempts counts the idle checks that ran; Slept the ones that
	// ended in the keeper; Failed the ones that could not sleep for a
	// reason other than work under way (errNotIdle): an error listing
	// the processes, a thread with the wrong bounding set, no memfd for
	// the state... Such an init stays awake and tries again a quiet
	// period later.
	Attempts int64 `json:"attempts"`
	Slept    int64 `json:"slept"`
	Failed   int64 `json:"failed"`
	// LastFailure is the reason of the last failure.
	LastFailure string `json:"last_failure,omitempty"`
	// Logged is the reason last written to the log.
	Logged string `json:"logged,omitempty"`
}

// note counts one attempt that ended in err (nil: it sleeps now) and says
// whether the failure is to be logged: the first of each reason in a row,
// and then the 2nd, 4th, 8th... failure, so a sandbox that can never sleep
// writes a line every doubling of its failures rather than every period.
func (r *sleepRecord) note(err error) bool {
	r.Attempts++
	switch {
	case err == nil:
		r.Slept++
		return false
	case errors.Is(err, errNotIdle):
		return false
	}
	r.Failed++
	r.LastFailure = err.Error()
	if r.LastFailure != r.Logged || r.Failed&(r.Failed-1) == 0 {
		r.Logged = r.LastFailure
		return true
	}
	return false
}

// trySleep is one attempt (sleepOnce), counted and, if it failed, reported.
func (sl *sleeper) trySleep() error {
	err := sl.sleepOnce()
	if sl.record.note(err) && sl.report != nil {
		r := sl.record
		_, _ = fmt.Fprintf(sl.report, "sandhold init: idle sleep failed, the init stays awake: %s (failed %d of %d attempts; slept %d)\n",
			r.LastFailure, r.Failed, r.Attempts, r.Slept)
	}
	return err
}

// sleepDisabled reports why an init cannot sleep, "" if it can.
func sleepDisabled(st proto.Setup, exe int) string {
	switch {
	case !keeperLinked:
		return "no keeper linked (amd64 lean init only)"
	case exe < 0:
		return "the init's program is not a sealed memfd"
	case st.SleepAfterMs < 0:
		return "off (sleep_after_ms < 0)"
	}
	return ""
}

// note records a request; the first one starts the timer, which re-arms
// itself until the init sleeps.
func (sl *sleeper) note() {
	sl.last.Store(time.Now().UnixNano())
	if sl.armed.CompareAndSwap(false, true) {
		sl.arm(sl.after)
	}
}

func (sl *sleeper) arm(d time.Duration) {
	time.AfterFunc(d, sl.fire)
}

// fire, once the quiet period has passed since the last request and
// nothing is under way, asks the server for leave to sleep (EventSleep;
// it answers with OpSleep, read by the protocol loop: granted), unless a
// question is open. Otherwise it waits: for the rest of the period after
// a newer request, a whole period if something is under way. The timer
// runs on, once a period, while the init is awake.
func (sl *sleeper) fire() {
	if quiet := time.Duration(time.Now().UnixNano() - sl.last.Load()); quiet < sl.after {
		sl.arm(sl.after - quiet)
		return
	}
	if sl.idle() && sl.asked.CompareAndSwap(0, time.Now().UnixNano()) {
		if err := sl.s.conn.Send(proto.Response{Kind: proto.EventSleep}); err != nil {
			sl.asked.Store(0)
		}
	}
	sl.arm(sl.after)
}

// granted runs on the protocol loop's goroutine when the server's leave
// to sleep (OpSleep) is read: the init sleeps if no request came since
// it asked and nothing is under way, and stays awake otherwise (the
// timer asks again a quiet period later). A leave with no question open
// is ignored.
func (sl *sleeper) granted() {
	asked := sl.asked.Load()
	if asked == 0 {
		return
	}
	if sl.last.Load() < asked {
		_ = sl.trySleep() // does not return if the init sleeps
	}
	sl.asked.Store(0)
}

// idle is the cheap part of the check: nothing read is unanswered, no
// spawn is queued, no child of the init is alive or unreported.
func (sl *sleeper) idle() bool {
	if sl.s.busy.Load() != 0 || len(sl.s.forks) != 0 {
		return false
	}
	sl.s.mu.Lock()
	defer sl.s.mu.Unlock()
	return len(sl.s.children) == 0
}

// errNotIdle: something is under way; the init stays awake.
var errNotIdle = errors.New("not idle")

// sleepOnce runs on the protocol loop's goroutine after its read stopped
// at fire's deadline, so no request is read meanwhile. If everything is
// idle it executes the keeper and does not return; otherwise it returns
// why not, with everything as it was.
func (sl *sleeper) sleepOnce() error {
	if !sl.idle() {
		return errNotIdle
	}
	alone, err := aloneInPidNS("/proc")
	if err != nil {
		return err
	}
	if !alone {
		return errNotIdle
	}
	// A child that ended before the check was reaped (zombies are listed
	// in /proc); its exit event may still be on its way: wait until the
	// reaper's pass under way, if any, has sent it.
	sl.s.reapMu.Lock()
	//nolint:staticcheck // SA2001: an empty critical section: waiting for the pass is the point
	sl.s.reapMu.Unlock()
	eg := sl.s.egress
	if eg != nil {
		eg.stop()
	}
	resume := func() {
		if eg != nil {
			eg.start()
		}
	}
	// Anything that arrived meanwhile is served awake.
	fds := []unix.PollFd{{Fd: fdOf(sl.s.conn), Events: unix.POLLIN}}
	if eg != nil {
		fds = append(fds, unix.PollFd{Fd: int32(eg.fd), Events: unix.POLLIN}) //nolint:gosec // G115: a descriptor
	}
	if n, err := unix.Poll(fds, 0); err != nil || n != 0 || !sl.idle() {
		resume()
		return errNotIdle
	}
	// The exec happens on this goroutine's thread, which must not be the
	// forking thread (its bounding set is empty) and must hold the set
	// the init started with. The lock is never undone on the way to the
	// exec: the thread is not handed back to the runtime.
	runtime.LockOSThread()
	if err := sl.execThreadOK(); err != nil {
		runtime.UnlockOSThread()
		resume()
		return err
	}
	// Counted before the state is written: the woken init carries on
	// with it.
	rec := sl.record
	rec.note(nil)
	state, err := sl.state(rec)
	if err != nil {
		runtime.UnlockOSThread()
		resume()
		return err
	}
	moves := sl.moves(eg)
	if err := sl.targetsSafe(moves); err != nil {
		_ = unix.Close(state)
		runtime.UnlockOSThread()
		resume()
		return err
	}
	err = sl.exec(keeperArgv0(eg != nil), []string{ResumeName, strconv.Itoa(state)}, moves, state)
	// exec only returns on failure, after it moved descriptors: the
	// init's state is no longer sound. Fail closed: the server sees its
	// init end.
	fmt.Fprintln(os.Stderr, "sandhold init: sleep:", err)
	os.Exit(1)
	return nil
}

func keeperArgv0(egress bool) string {
	if egress {
		return KeeperName + "+"
	}
	return KeeperName
}

// execThreadOK checks the calling (locked) thread may exec the keeper.
func (sl *sleeper) execThreadOK() error {
	if unix.Gettid() == unix.Getpid() {
		return errors.New("sleep: on the forking thread")
	}
	b, err := caps.ThreadBounding()
	if err != nil {
		return fmt.Errorf("sleep: %w", err)
	}
	if b != sl.bset {
		return fmt.Errorf("sleep: this thread's bounding set is %#x, not the init's %#x", b, sl.bset)
	}
	return nil
}

// resumeState is what the resumed init needs of the one that slept: JSON
// in a sealed memfd whose descriptor number alone is the resumed init's
// argv[1]. Not in argv itself: /proc/1/cmdline is readable to every
// process in the sandbox, non-dumpable or not, and would show the
// sandbox's configuration. The memfd is close-on-exec in the sleeping init
// until the last moment before the exec (nothing is forked then), is held
// without it only by the keeper and by the resumed init until it has read
// it — while no other process is in the sandbox, and PID 1 is non-dumpable
// so its /proc/1/fd is closed to the sandbox anyway — and the resumed init
// closes it before it serves.
type resumeState struct {
	Setup proto.Setup `json:"setup"`
	// Slack is the forking thread's timer slack to restore.
	Slack int `json:"slack"`
	// Record is the count of attempts to sleep, this one included.
	Record sleepRecord `json:"record"`
}

// state writes the resumed init's state into a sealed, close-on-exec memfd
// numbered above every descriptor the keeper needs at a fixed number.
func (sl *sleeper) state(rec sleepRecord) (int, error) {
	b, err := json.Marshal(resumeState{Setup: sl.s.setup, Slack: sl.slack, Record: rec})
	if err != nil {
		return -1, fmt.Errorf("sleep: encode state: %w", err)
	}
	fd, err := sealedMemfd("sandhold-resume", b)
	if err != nil {
		return -1, fmt.Errorf("sleep: state: %w", err)
	}
	if fd > proto.FDExe {
		return fd, nil
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, proto.FDExe+1) //nolint:gosec // G115: a descriptor
	_ = unix.Close(fd)
	if err != nil {
		return -1, fmt.Errorf("sleep: state: %w", err)
	}
	return high, nil
}

// sealedMemfd returns a close-on-exec memfd holding b, sealed against any
// change.
func sealedMemfd(name string, b []byte) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) {
		// Before Linux 6.3 there is no MFD_NOEXEC_SEAL.
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(fd, b[off:], int64(off))
		if err != nil {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("write memfd: %w", err)
		}
		off += n
	}
	const seals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("seal memfd: %w", err)
	}
	return fd, nil
}

// readResumeState reads and closes the state the init that slept left on
// descriptor arg (the resumed init's argv[1]): a sealed memfd.
func readResumeState(arg string) (resumeState, error) {
	var rs resumeState
	fd, err := strconv.Atoi(arg)
	if err != nil || fd <= proto.FDExe {
		return rs, fmt.Errorf("resume: state descriptor %q, want a number above %d", arg, proto.FDExe)
	}
	defer func() { _ = unix.Close(fd) }()
	const want = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0) //nolint:gosec // G115: a descriptor
	if err != nil {
		return rs, fmt.Errorf("resume: descriptor %d is not a sealed memfd: %w", fd, err)
	}
	if seals&want != want {
		return rs, fmt.Errorf("resume: descriptor %d is not a sealed memfd (seals %#x)", fd, seals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return rs, fmt.Errorf("resume: state: %w", err)
	}
	if st.Size <= 0 || st.Size > maxResumeState {
		return rs, fmt.Errorf("resume: state of %d bytes", st.Size)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return rs, fmt.Errorf("resume: read state: %w", err)
		}
		if n == 0 {
			return rs, errors.New("resume: state cut short")
		}
		off += n
	}
	if err := json.Unmarshal(b, &rs); err != nil {
		return rs, fmt.Errorf("resume: %w", err)
	}
	return rs, nil
}

// fdMove is a descriptor the keeper needs and the number it needs it at.
type fdMove struct{ from, to int }

// moves lists what the keeper holds at fixed numbers: the protocol socket,
// the program and the egress listener.
func (sl *sleeper) moves(eg *egressRelay) []fdMove {
	m := []fdMove{{int(fdOf(sl.s.conn)), proto.FDConn}, {sl.exe, proto.FDExe}}
	if eg != nil {
		m = append(m, fdMove{eg.fd, fdEgressSleep})
	}
	return m
}

// targetsSafe checks that the moves overwrite nothing the init still uses
// until the exec: every target is free, one of the moved descriptors (they
// are copied first), or /dev/null. Anything else — the runtime's poller,
// say — would be closed under a running thread's feet.
func (sl *sleeper) targetsSafe(moves []fdMove) error {
	for _, m := range moves {
		ok := m.to == sl.s.devNull
		for _, o := range moves {
			ok = ok || m.to == o.from
		}
		if ok {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(m.to), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			what, _ := os.Readlink("/proc/thread-self/fd/" + strconv.Itoa(m.to))
			return fmt.Errorf("sleep: descriptor %d, which the keeper needs, holds %q", m.to, what)
		}
	}
	return nil
}

// exec moves the descriptors the keeper needs to their numbers, without
// close-on-exec, clears close-on-exec on the state (above them all) and
// executes the keeper. Every other descriptor of the init is
// close-on-exec. It returns only on failure.
func (sl *sleeper) exec(argv0 string, rest []string, moves []fdMove, state int) error {
	argvp, err := syscall.SlicePtrFromStrings(append([]string{argv0}, rest...))
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return err
	}
	empty, err := unix.BytePtrFromString("")
	if err != nil {
		return err
	}
	// Copies above any target first, so no move overwrites a source. A
	// target may hold /dev/null, which the exec would close anyway;
	// targetsSafe checked it holds nothing else.
	for i, m := range moves {
		fd, err := unix.FcntlInt(uintptr(m.from), unix.F_DUPFD_CLOEXEC, proto.FDExe+1)
		if err != nil {
			return fmt.Errorf("copy descriptor %d: %w", m.from, err)
		}
		moves[i].from = fd
	}
	for _, m := range moves {
		if err := unix.Dup3(m.from, m.to, 0); err != nil {
			return fmt.Errorf("move descriptor to %d: %w", m.to, err)
		}
	}
	if _, err := unix.FcntlInt(uintptr(state), unix.F_SETFD, 0); err != nil { //nolint:gosec // G115: a descriptor
		return fmt.Errorf("hand on the state: %w", err)
	}
	// The forking thread's timer slack is restored after the wake; this
	// thread's is inherited by the resumed init's threads, sysmon among
	// them (see sysmon_linux.go: landlock keeps /proc read-only to the
	// resumed init, so it cannot set sysmon's as Main does).
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, SysmonSlack, 0, 0, 0)
	// A clean signal mask: the resumed runtime keeps the one it starts
	// with for every child it forks.
	var none unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil); err != nil {
		return fmt.Errorf("clear the signal mask: %w", err)
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_EXECVEAT, uintptr(proto.FDExe), uintptr(unsafe.Pointer(empty)), //nolint:gosec // G103: execveat(2) takes pointers
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0) //nolint:gosec // G103: execveat(2) takes pointers
	runtime.KeepAlive(argvp)
	runtime.KeepAlive(envp)
	return fmt.Errorf("execveat keeper: %w", errno)
}

// fdOf is the protocol socket's descriptor.
func fdOf(c *proto.Conn) int32 {
	var fd int32 = -1
	if rc, err := c.Unix().SyscallConn(); err == nil {
		_ = rc.Control(func(u uintptr) { fd = int32(u) }) //nolint:gosec // G115: a descriptor
	}
	return fd
}

// aloneInPidNS reports whether the pid namespace whose proc is mounted at
// dir holds no process but 1. Zombies are listed too.
func aloneInPidNS(dir string) (bool, error) {
	d, err := os.Open(dir) //nolint:gosec // G304: the sandbox's own /proc
	if err != nil {
		return false, fmt.Errorf("sleep: list processes: %w", err)
	}
	defer func() { _ = d.Close() }()
	for {
		names, err := d.Readdirnames(64)
		for _, n := range names {
			if pid, perr := strconv.Atoi(n); perr == nil && pid != 1 {
				return false, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("sleep: list processes: %w", err)
		}
	}
}

// keptExe returns a close-on-exec duplicate of descriptor fd if it is this
// process's own program (the memfd the server started it from), else -1.
func keptExe(fd int) int {
	var a, b unix.Stat_t
	if unix.Fstat(fd, &a) != nil || unix.Stat("/proc/self/exe", &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		return -1
	}
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return nfd
}

// threadSecurity reads the "Seccomp", "NoNewPrivs" and "CapAmb" fields of
// the calling thread's status.
func threadSecurity() (seccomp, nnp, ambient string, err error) {
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return "", "", "", err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			seccomp = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "NoNewPrivs:"); ok {
			nnp = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "CapAmb:"); ok {
			ambient = strings.TrimSpace(v)
		}
	}
	return seccomp, nnp, ambient, nil
}

func newSleeper(s *server, exe int, bset uint64, slack int) *sleeper {
	after := sleepAfter
	if s.setup.SleepAfterMs > 0 {
		after = time.Duration(s.setup.SleepAfterMs) * time.Millisecond
	}
	return &sleeper{s: s, after: after, exe: exe, bset: bset, slack: slack, report: os.Stderr}
}

// resume is Main for an init the keeper woke: the sandbox was set up by the
// init that slept (namespaces, root, landlock, seccomp and no_new_privs
// survive execve and cannot be undone from inside); what belongs to the
// process and is reset by execve is set again, and the forking thread drops
// its bounding set again. Then it serves the message that woke it.
func resume() error {
	if len(os.Args) != 2 {
		return errors.New("resume: want one argument")
	}
	rs, err := readResumeState(os.Args[1])
	if err != nil {
		return err
	}
	st := rs.Setup
	exe := keptExe(proto.FDExe)
	egress := -1
	if st.EgressListen && !st.HostNetwork {
		fd, err := unix.FcntlInt(fdEgressSleep, unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("resume: egress listener: %w", err)
		}
		egress = fd
	}
	conn, err := adoptProto()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	// The originals of what was kept above, and anything else.
	if err := fds.CloseInherited(proto.FDConn); err != nil {
		return err
	}
	if err := processSettings(); err != nil {
		return err
	}
	// The exec from the keeper's only thread kept it; the resumed init
	// sets it for itself all the same (it is cheap and this is PID 1).
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("resume: parent-death signal: %w", err)
	}
	if err := checkResumed(st); err != nil {
		return err
	}
	bset, err := caps.ThreadBounding()
	if err != nil {
		return err
	}
	// The ambient sets were cleared on every thread at setup and a root
	// exec keeps them as they were (checkResumed checked): only the
	// forking thread's bounding set is to drop again.
	if err := caps.DropBoundingSetThread(); err != nil && !st.Insecure {
		return fmt.Errorf("resume: %w", err)
	}
	if rs.Slack > 0 {
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(rs.Slack), 0, 0, 0) //nolint:gosec // G115: a positive slack in ns
	}
	s := newServer(conn, st)
	s.devNull, err = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("resume: open /dev/null: %w", err)
	}
	if sleepDisabled(st, exe) == "" {
		s.sleep = newSleeper(s, exe, bset, rs.Slack)
		s.sleep.record = rs.Record
	} else if exe >= 0 {
		_ = unix.Close(exe)
	}
	return s.run(egress)
}

// checkResumed checks, before the resumed init serves, that the layers it
// inherited are there: the cgroup namespace shows the sandbox's group as
// its root, and seccomp (filter mode) and no_new_privs hold (unless the
// sandbox runs without isolation).
func checkResumed(st proto.Setup) error {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return fmt.Errorf("resume: read the cgroup view: %w", err)
	}
	if _, leaked := hostCgroupPath(string(b)); leaked {
		return errors.New("resume: the cgroup namespace is not the sandbox's")
	}
	if st.Insecure {
		return nil
	}
	mode, nnp, amb, err := threadSecurity()
	if err != nil {
		return fmt.Errorf("resume: read own status: %w", err)
	}
	if mode != "2" || nnp != "1" || amb != "0000000000000000" {
		return fmt.Errorf("resume: seccomp mode %q, no_new_privs %q, ambient capabilities %q; want 2, 1 and none", mode, nnp, amb)
	}
	return nil
}
