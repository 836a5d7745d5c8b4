package sandbox

import (
	"fmt"
	"math"

	"github.com/sandhold/sandhold/internal/fault"
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

// promiseCap is what the quotas may promise together: the budget times the
// over-commit ratio (at least 1), saturating.
func promiseCap(budget int64, ratio int) int64 {
	r := int64(max(ratio, 1))
	if budget > math.MaxInt64/r {
		return math.MaxInt64
	}
	return budget * r
}

// reserveDisk claims n bytes of the promise cap for a sandbox being made
// (by a create, or by the warm pool p). The caller calls the returned
// release once the sandbox is listed (in m.sandboxes or the pool), or made
// nothing. Over the cap, or while the guard stops growth, it refuses with
// a conflict (409) on limits.disk that says what would make room.
func (m *Manager) reserveDisk(p *pool, n int64) (release func(), err error) {
	if err := m.diskRefusal(); err != nil {
		return nil, err
	}
	budget := m.cfg.DiskBudget
	if budget <= 0 || n <= 0 {
		return func() {}, nil
	}
	limit := promiseCap(budget, m.cfg.DiskOvercommit)
	var pooled int64
	if p != nil {
		pooled = p.diskBytes()
	}
	m.mu.Lock()
	committed := pooled + m.diskPending + m.idx.disk
	if committed+n > limit {
		m.mu.Unlock()
		return nil, &fault.Error{Kind: fault.Conflict, Field: "limits.disk", Msg: fmt.Sprintf(
			"the server's disk budget is committed: %s promised to sandboxes of %s (SANDBOX_DISK_BUDGET %s × SANDBOX_DISK_OVERCOMMIT %d), %s asked; "+
				"ask for a smaller limits.disk or delete a sandbox (the operator can lower SANDBOX_MAX_DISK, the default quota, or raise SANDBOX_DISK_OVERCOMMIT or SANDBOX_DISK_BUDGET)",
			iBytes(committed), iBytes(limit), iBytes(budget), max(m.cfg.DiskOvercommit, 1), iBytes(n))}
	}
	m.diskPending += n
	m.mu.Unlock()
	done := false
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !done {
			done = true
			m.diskPending -= n
		}
	}, nil
}

// DiskCommitted is the sum of the workspace quotas promised now (recorded
// sandboxes, the warm pool, sandboxes being made), for metrics and tests.
func (m *Manager) DiskCommitted() int64 {
	pooled := m.pool.diskBytes()
	m.mu.Lock()
	defer m.mu.Unlock()
	return pooled + m.diskPending + m.idx.disk
}

// diskBytes sums the quotas of the ready pool sandboxes.
func (p *pool) diskBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, s := range p.ready {
		n += s.diskBytes()
	}
	return n
}
