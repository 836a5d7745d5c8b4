package diskbudget

import (
	"fmt"
	"sync"

	"github.com/sandhold/sandhold/internal/fault"
)

// The disk budget (SANDBOX_DISK_BUDGET) bounds the bytes the workspace
// images may hold on the host, and SANDBOX_DISK_OVERCOMMIT times it bounds
// the sum of the quotas the server has promised. Every image is sparse and
// most workspaces fill a small part of their quota (a fresh 5 GB one holds
// about 110 KiB, a Python venv 25 MB), so promises beyond the bytes there
// are let a host hold hundreds of sandboxes (with the defaults, 236 of 5 GB
// on a host with 55 GiB free), while the disk guard (Guard) stops the
// images' growth once what they really hold reaches the budget: the
// kernel's per-image limit, the promise cap and the guard together keep
// the workspaces off the part of the disk (by default a fifth of the free
// space at start) that the store and the audit log live on.

// Ledger counts the quotas promised, in three places, all under one lock,
// so a reservation sees every promise at once: the listed sandboxes'
// (List, Unlist), the warm pool's ready sandboxes' (pooled) and those of
// sandboxes being made, and of pool sandboxes being handed to a create
// (pending). A quota moves between them in one step — a pool sandbox taken
// by a create goes from pooled to pending before the pool's lock is let
// go, and is listed before its pending reservation is released — so no
// moment exists in which a promised quota is counted nowhere (before,
// pool.take dropped it from the pool before create listed it, and a refill
// racing the create promised 30 GB on a 25 GB budget). Its zero value is
// an empty ledger.
type Ledger struct {
	// mu guards the counts below.
	mu      sync.Mutex
	listed  int64
	pooled  int64
	pending int64
}

// Reserve claims n bytes of the promise cap (budget times overcommit,
// PromiseCap) for a sandbox being made. The caller calls the returned
// release once the sandbox is listed, or made nothing; a pool refill hands
// its reservation to the pool's count instead (IntoPool). Without a budget,
// or for no bytes, nothing is counted. Over the cap it refuses with a
// conflict (409) on limits.disk that says what would make room.
func (l *Ledger) Reserve(n, budget int64, overcommit int) (release func(), err error) {
	if budget <= 0 || n <= 0 {
		return func() {}, nil
	}
	limit := PromiseCap(budget, overcommit)
	l.mu.Lock()
	committed := l.pooled + l.pending + l.listed
	if committed+n > limit {
		l.mu.Unlock()
		return nil, &fault.Error{Kind: fault.Conflict, Field: "limits.disk", Msg: fmt.Sprintf(
			"the server's disk budget is committed: %s promised to sandboxes of %s (SANDBOX_DISK_BUDGET %s × SANDBOX_DISK_OVERCOMMIT %d), %s asked; "+
				"ask for a smaller limits.disk or delete a sandbox (the operator can lower SANDBOX_MAX_DISK, the default quota, or raise SANDBOX_DISK_OVERCOMMIT or SANDBOX_DISK_BUDGET)",
			IBytes(committed), IBytes(limit), IBytes(budget), max(overcommit, 1), IBytes(n))}
	}
	l.pending += n
	l.mu.Unlock()
	return l.pendingRelease(n), nil
}

// pendingRelease is the release of n pending bytes (once).
func (l *Ledger) pendingRelease(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.pending -= n
		})
	}
}

// IntoPool moves a refill's pending reservation (n) to the pool's count
// (q, the sandbox's quota) in one step.
func (l *Ledger) IntoPool(n, q int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending -= n
	l.pooled += q
}

// OutOfPool moves a pool sandbox's quota q from the pool's count to
// pending in one step (a create took it: its release comes once it is
// listed), or drops it (to nowhere: a sandbox thrown away).
func (l *Ledger) OutOfPool(q int64, toPending bool) (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pooled -= q
	if !toPending {
		return func() {}
	}
	l.pending += q
	return l.pendingRelease(q)
}

// List counts the quota q of a sandbox the server lists.
func (l *Ledger) List(q int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listed += q
}

// Unlist drops the quota q of a sandbox the server no longer lists.
func (l *Ledger) Unlist(q int64) { l.List(-q) }

// Committed is the sum of the quotas promised now: listed, pooled and
// pending.
func (l *Ledger) Committed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pooled + l.pending + l.listed
}
