package sandboxinit

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Ending an idle init's spare threads.
//
// The Go runtime never ends a thread it started: one made for a burst
// (a goroutine in a blocking system call, a wake-up while every thread
// was busy) stays parked for the process's life. An init had 8 threads a
// moment after its start (traced: sysmon, the template thread every
// LockOSThread starts, two that os/signal keeps — its receiver waiting in
// the runtime and ensureSigM's locked goroutine — and four made by
// wake-ups in the runtime's and the setup's first milliseconds) and more
// after a burst of calls. Each costs ≈25 kB of kernel memory, and every
// pivot_root on the host visits every thread on the host
// (chroot_fs_refs takes each one's task_lock), so at a thousand awake
// sandboxes their threads are the larger part of what a new sandbox's
// start pays for them (BENCHMARKS.md "Where creation grows at 1,000
// sandboxes").
//
// Two changes bring an idle init to 4-5 (TestIdleInitEndsSpareThreads):
// the init no longer uses os/signal (processSettings, reap), and once
// calls stop it ends its idle threads. The one way a Go program ends a
// thread is a goroutine that exits while locked to it. threadTrim.trim,
// run with the idle release (release_linux.go), sets GOMAXPROCS to 1,
// parks a locked goroutine on every idle thread in turn and then lets
// them all exit. With one P, no wake-up along the way finds an idle P for
// which to start a thread, so a walk makes at most one new thread (the
// count shows when: the walk stops there) and every goroutine released
// exits on its own thread. One P stays until the next request
// (threadTrim.restore, before it is served): raising GOMAXPROCS at once
// would start a thread for the new P straight away. The release's own
// goroutine then ends locked too, taking its thread. What stays: the
// forking thread (locked to the main goroutine), sysmon, the template
// thread, the one waiting in the network poller, and at times one idle.
// Threads not idle are never touched (those in a system call, the locked
// ones).
//
// The runtime makes new threads the next time it needs them, from a
// thread of the init: each starts with the init's seccomp filter,
// landlock domain and no_new_privs, which every thread of the process
// holds, so ending and remaking threads changes nothing the sandbox can do
// (the test checks every thread after a second burst). Commands are forked
// only by the main thread, which is never ended.

// trimLimit bounds the walk: more idle threads than this after a burst
// are ended by the next quiet period's walk.
const trimLimit = 64

// trimWalks is the most walks one trim makes, trimPause apart.
const (
	trimWalks = 5
	trimPause = 20 * time.Millisecond
)

// trimFloor is the fewest threads a walk can leave: the forking thread,
// sysmon, the template thread, the one waiting in the network poller and
// the walk's own.
const trimFloor = 5

// threadTrim ends idle threads and holds GOMAXPROCS at 1 until the next
// request.
type threadTrim struct {
	trimmed atomic.Bool
	mu      sync.Mutex
	procs   int // GOMAXPROCS to restore; 0 when not trimmed
}

// trim ends the runtime's idle threads and returns the thread count
// before and after (-1 if the runtime does not count them). It must not
// run on a locked goroutine.
func (t *threadTrim) trim() (before, after int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	before = threadCount()
	if before < 0 || t.procs > 0 {
		return before, before
	}
	t.procs = runtime.GOMAXPROCS(1)
	t.trimmed.Store(true)
	// A walk can leave an idle thread behind: the one it stopped at, or
	// one busy (spinning, leaving a system call) when the walk passed,
	// which on a loaded host may take a while to park. Each walk costs at
	// most one new thread, which it ends again, so a few more, a moment
	// apart, are cheap; they stop at the floor (trimFloor).
	for i := range trimWalks {
		if i > 0 {
			time.Sleep(trimPause)
		}
		if after = endIdleThreads(); after <= trimFloor {
			break
		}
	}
	return before, after
}

// endIdleThreads parks a locked goroutine on every idle thread in turn
// and lets them all exit; it returns the thread count after.
func endIdleThreads() int {
	release := make(chan struct{})
	var exited sync.WaitGroup
	for range trimLimit {
		n := threadCount()
		parked := make(chan struct{})
		exited.Add(1)
		go func() {
			defer exited.Done()
			// Never unlocked: the thread ends with the goroutine.
			runtime.LockOSThread()
			close(parked)
			<-release
		}()
		<-parked
		// This goroutine needed a thread to carry on while the other
		// holds its own: a new one means none was idle any more.
		if threadCount() > n {
			break
		}
	}
	close(release)
	exited.Wait()
	return threadCount()
}

// restore gives the init its GOMAXPROCS back after a trim; a no-op
// otherwise. Called for every request before it is served.
func (t *threadTrim) restore() {
	if !t.trimmed.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.procs > 0 {
		runtime.GOMAXPROCS(t.procs)
		t.procs = 0
	}
	t.trimmed.Store(false)
}

// threadCount is the number of threads the runtime has started and not
// ended.
func threadCount() int {
	s := []metrics.Sample{{Name: "/sched/threads/total:threads"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int(s[0].Value.Uint64()) //nolint:gosec // G115: a thread count
}
