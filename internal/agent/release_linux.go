package agent

import (
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
// that memory once calls stop: one to two releaseAfter periods after the
// last request (the timer checks once per period) it runs
// debug.FreeOSMemory (one collection and a scavenge, about a millisecond
// of CPU). No timer runs while nothing happens, and a busy init never
// collects more often than the runtime's own pacing: the release waits for
// a quiet period.

// releaseAfter is the quiet period after the last request before the init
// returns its free memory.
const releaseAfter = 3 * time.Second

// idleRelease counts requests and arranges one release per quiet period.
type idleRelease struct {
	calls atomic.Uint64
	armed atomic.Bool
	// free returns the memory; debug.FreeOSMemory outside tests.
	free  func()
	after time.Duration
}

func newIdleRelease() *idleRelease {
	return &idleRelease{free: debug.FreeOSMemory, after: releaseAfter}
}

// note records a request and arms the release timer unless it is armed.
func (r *idleRelease) note() {
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
