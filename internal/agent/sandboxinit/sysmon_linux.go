package sandboxinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// The Go runtime's sysmon thread, and why the init slows it down.
//
// sysmon is the runtime's watchdog thread: it takes a P back from a thread
// blocked in a system call, preempts goroutines that ran for 10 ms, polls
// the network when every P is busy, and forces a GC every two minutes. When
// the process goes idle it sleeps until the next system call wakes it; then
// it polls every 20 µs (nanosleep, stretched to the thread's 50 µs default
// timer slack) for about fifty rounds before it backs off towards 10 ms. An
// init serving a command every few milliseconds wakes it for every command,
// so it polls continuously: measured on this project's VM (nested
// virtualisation, where a timer and two context switches cost ≈20 µs of
// CPU), sysmon used as much CPU per spawn as the forking thread itself,
// about 1 ms (BenchmarkSpawnCost, BENCHMARKS.md "The init's share of an exec").
//
// A timer slack of SysmonSlack on that one thread lets the kernel stretch
// each of those 20 µs sleeps to up to 1 ms, so a burst costs a handful of
// polls instead of fifty per millisecond. What it delays: taking a P back
// from a blocked system call (20–70 µs before, up to ≈1 ms now; the init
// runs with spare Ps, so a runnable goroutine normally finds an idle one
// without sysmon) and nothing else of note (preemption waits 10 ms anyway,
// the idle backoff reaches 10 ms). No isolation layer is involved. The
// commands are not affected: a timer slack is per thread and inherited from
// the forking thread, and the init's main thread, which forks every command,
// keeps the default (TestCommandsKeepDefaultTimerSlack).
//
// Which thread is sysmon: runtime.main creates it before anything else runs
// (before package initialisation, before main.main), so in the sandbox's
// fresh pid namespace it is thread 2, PID 1 being the init's main thread.
// The init finds it by that number in the NSpid line of its threads'
// status files (the host's /proc is still mounted when this runs).
//
// An init woken from its keeper (sleep_linux.go) cannot do the same, and
// there is no other selective way: another thread's slack is set only
// through /proc/<tid>/timerslack_ns, which landlock (everything under /
// read-only) forbids the init to write once it has set the sandbox up;
// prctl(PR_SET_TIMERSLACK) sets the calling thread's only, and
// AllThreadsSyscall would set sysmon's the same as every other's. So the
// thread that execs the keeper takes SysmonSlack before the exec: the
// resumed runtime's first thread starts with it and sysmon, cloned from
// it first, inherits it, as do the other threads the runtime starts
// before resume runs (and their clones); resume gives the forking thread
// its own slack back, so commands keep theirs (TestWokenInitKeepsIsolation,
// TestWokenInitSysmonKeepsItsSlack). What the others' 1 ms delays is only
// timed waits (a timer, a poll with a timeout), never a wake-up by an
// event such as a request arriving.
const SysmonSlack = 1_000_000 // ns

// SysmonTID is sysmon's thread id inside the sandbox's pid namespace.
const SysmonTID = 2

// slowSysmon sets SysmonSlack on the runtime's sysmon thread. It runs first
// thing in Main, while the init holds every capability of its user
// namespace (writing another thread's timerslack_ns takes CAP_SYS_NICE) and
// the host's /proc is still its /proc. A failure changes only speed, not
// isolation; Main reports it on stderr and carries on.
func slowSysmon() error {
	tid, err := nsThread("/proc/self/task", SysmonTID)
	if err != nil {
		return err
	}
	// timerslack_ns exists only in the /proc/<id> directories (not in
	// task/<id>); a thread's id names the thread there.
	p := fmt.Sprintf("/proc/%d/timerslack_ns", tid)
	if err := os.WriteFile(p, []byte(strconv.Itoa(SysmonSlack)), 0); err != nil {
		return fmt.Errorf("set sysmon's timer slack: %w", err)
	}
	return nil
}

// nsThread returns the id, as the directory tasks names it, of the thread
// whose id in its innermost pid namespace is want.
func nsThread(tasks string, want int) (int, error) {
	root, err := os.OpenRoot(tasks)
	if err != nil {
		return 0, fmt.Errorf("open the thread list: %w", err)
	}
	defer func() { _ = root.Close() }()
	ents, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return 0, fmt.Errorf("list threads: %w", err)
	}
	for _, e := range ents {
		b, err := root.ReadFile(e.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		if inner, ok := InnermostNSpid(string(b)); ok && inner == want {
			return strconv.Atoi(e.Name())
		}
	}
	return 0, errors.New("no thread with that id in the pid namespace")
}

// InnermostNSpid is the last id on the NSpid line of a status file: the
// thread's id in its innermost pid namespace.
func InnermostNSpid(status string) (int, bool) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "NSpid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.Atoi(f[len(f)-1])
		return n, err == nil
	}
	return 0, false
}
