package sandbox

import (
	"fmt"
	"sync"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
)

// The disk budget (SANDBOX_DISK_BUDGET) bounds the bytes the workspace
// images may hold on the host, and SANDBOX_DISK_OVERCOMMIT times it bounds
// the sum of the quotas the server has promised. Every image is sparse and
// most workspaces fill a small part of their quota (a fresh 5 GB one holds
// about 110 KiB, a Python venv 25 MB), so promises beyond the bytes there
// are let a host hold hundreds of sandboxes (with the defaults, 236 of 5 GB
// on a host with 55 GiB free), while the disk guard (diskguard.go) stops
// the images' growth once what they really hold reaches the budget: the
// kernel's per-image limit, the promise cap and the guard together keep
// the workspaces off the part of the disk (by default a fifth of the free
// space at start) that the store and the audit log live on.

// The promises are counted in three places, all under m.mu, so a
// reservation sees every promise at once: m.idx.disk (listed sandboxes),
// m.diskPooled (the warm pool's ready sandboxes) and m.diskPending
// (sandboxes being made, and pool sandboxes being handed to a create). A
// quota moves between them in one step — a pool sandbox taken by a create
// goes from pooled to pending before the pool's lock is let go, and from
// pending to listed under one lock — so no moment exists in which a
// promised quota is counted nowhere (before, pool.take dropped it from the
// pool before create listed it, and a refill racing the create promised
// 30 GB on a 25 GB budget).

// reserveDisk claims n bytes of the promise cap for a sandbox being made
// (by a create, or by the warm pool). The caller calls the returned
// release once the sandbox is listed (in m.sandboxes), or made nothing;
// the pool hands its reservation to the pool's count instead (poolDisk).
// Over the cap, or while the guard stops growth, it refuses with a
// conflict (409) on limits.disk that says what would make room.
func (m *Manager) reserveDisk(n int64) (release func(), err error) {
	if err := m.guard.Refusal(); err != nil {
		return nil, err
	}
	budget := m.cfg.DiskBudget
	if budget <= 0 || n <= 0 {
		return func() {}, nil
	}
	limit := diskbudget.PromiseCap(budget, m.cfg.DiskOvercommit)
	m.mu.Lock()
	committed := m.diskPooled + m.diskPending + m.idx.disk
	if committed+n > limit {
		m.mu.Unlock()
		return nil, &fault.Error{Kind: fault.Conflict, Field: "limits.disk", Msg: fmt.Sprintf(
			"the server's disk budget is committed: %s promised to sandboxes of %s (SANDBOX_DISK_BUDGET %s × SANDBOX_DISK_OVERCOMMIT %d), %s asked; "+
				"ask for a smaller limits.disk or delete a sandbox (the operator can lower SANDBOX_MAX_DISK, the default quota, or raise SANDBOX_DISK_OVERCOMMIT or SANDBOX_DISK_BUDGET)",
			diskbudget.IBytes(committed), diskbudget.IBytes(limit), diskbudget.IBytes(budget), max(m.cfg.DiskOvercommit, 1), diskbudget.IBytes(n))}
	}
	m.diskPending += n
	m.mu.Unlock()
	return m.pendingRelease(n), nil
}

// pendingRelease is the release of n pending bytes (once).
func (m *Manager) pendingRelease(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.diskPending -= n
		})
	}
}

// diskIntoPool moves a refill's pending reservation (n) to the pool's
// count (q, the sandbox's quota) in one step.
func (m *Manager) diskIntoPool(n, q int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.diskPending -= n
	m.diskPooled += q
}

// diskOutOfPool moves a pool sandbox's quota q from the pool's count to
// pending in one step (a create took it: its release comes once it is
// listed), or drops it (to nowhere: a sandbox thrown away).
func (m *Manager) diskOutOfPool(q int64, toPending bool) (release func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.diskPooled -= q
	if !toPending {
		return func() {}
	}
	m.diskPending += q
	return m.pendingRelease(q)
}

// DiskCommitted is the sum of the workspace quotas promised now (recorded
// sandboxes, the warm pool, sandboxes being made), for metrics and tests.
func (m *Manager) DiskCommitted() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.diskPooled + m.diskPending + m.idx.disk
}
