package sandboxinit

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Giving memory back after a burst.
//
// An idle init holds about 2 MB of private memory, but one that has served
// a burst of calls holds 5.5-6 MB for as long as it lives: the Go heap grows
// to its 4 MB minimum goal before the first collection, and the runtime
// keeps freed pages for reuse, returning them only slowly (measured in
// BenchmarkInitMaxProcs and TestIdleInitReturnsMemory). A host runs hundreds
// of sandboxes that are mostly idle between bursts, so the init returns
// that memory once calls stop: one to two ReleaseAfter periods after the
// last request (the timer checks once per period) it runs
// debug.FreeOSMemory (one collection and a scavenge, about a millisecond
// of CPU) and ends the runtime's idle threads (threads_linux.go). No timer
// runs while nothing happens, and a busy init never collects more often
// than the runtime's own pacing: the release waits for a quiet period.

// ReleaseAfter is the quiet period after the last request before the init
// returns its free memory.
const ReleaseAfter = 3 * time.Second

// idleRelease counts requests and arranges one release per quiet period.
type idleRelease struct {
	calls atomic.Uint64
	armed atomic.Bool
	// free returns the memory; outside tests releaseIdle, with threads.
	free func()
	// threads ends idle threads; restored before each request.
	threads threadTrim
	after   time.Duration
}

func newIdleRelease() *idleRelease {
	r := &idleRelease{after: ReleaseAfter}
	r.free = r.releaseIdle
	return r
}

// releaseIdle gives back the free heap and the idle threads. It runs on
// the goroutine time.AfterFunc started for fire, which ends soon after:
// locked to its thread, it takes that thread with it, the last idle one
// (threads_linux.go).
func (r *idleRelease) releaseIdle() {
	debug.FreeOSMemory()
	r.threads.trim()
	runtime.LockOSThread()
}

// note records a request and arms the release timer unless it is armed.
// A request is noted before it is served: it gets the GOMAXPROCS a
// release took away back first.
func (r *idleRelease) note() {
	r.threads.restore()
	r.calls.Add(1)
	if r.armed.CompareAndSwap(false, true) {
		r.arm()
	}
}

func (r *idleRelease) arm() {
	seen := r.calls.Load()
	time.AfterFunc(r.after, func() { r.fire(seen) })
}

// fire releases the memory if no request came since seen, else waits
// another period.
func (r *idleRelease) fire(seen uint64) {
	if r.calls.Load() != seen {
		r.arm()
		return
	}
	r.free()
	r.armed.Store(false)
	// A request that came while the release ran saw the timer armed and
	// did not arm it; it gets its own quiet period.
	if r.calls.Load() != seen && r.armed.CompareAndSwap(false, true) {
		r.arm()
	}
}
