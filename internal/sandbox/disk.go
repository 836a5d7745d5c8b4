package sandbox

import (
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/sandhold/sandhold/internal/fault"
)

// The disk budget (SANDBOX_DISK_BUDGET) bounds the sum of the workspace
// quotas the server has promised: every sandbox's image is sparse, so
// without it ten sandboxes of 5 GB on each of N keys promise far more than
// the data dir's file system holds, and the first writer to run the host
// out of space may be the store or the audit log. With it, the kernel's
// per-image limit and this sum together keep the workspaces within the
// budget, which by default leaves a fifth of the free space (at start) to
// everything else in the data dir.

// reserveDisk claims n bytes of the budget for a sandbox being made (by a
// create, or by the warm pool p). The caller calls the returned release
// once the sandbox is listed (in m.sandboxes or the pool), or made nothing.
// Over the budget it refuses with a conflict (409) naming the budget and
// the field.
func (m *Manager) reserveDisk(p *pool, n int64) (release func(), err error) {
	budget := m.cfg.DiskBudget
	if budget <= 0 || n <= 0 {
		return func() {}, nil
	}
	var pooled int64
	if p != nil {
		pooled = p.diskBytes()
	}
	m.mu.Lock()
	committed := pooled + m.diskPending + m.idx.disk
	if committed+n > budget {
		m.mu.Unlock()
		return nil, &fault.Error{Kind: fault.Conflict, Field: "limits.disk", Msg: fmt.Sprintf(
			"the server's disk budget (SANDBOX_DISK_BUDGET, %s) is committed: %s promised to sandboxes, %s asked; ask for a smaller limits.disk or delete a sandbox",
			humanize.IBytes(uint64(budget)), humanize.IBytes(uint64(committed)), humanize.IBytes(uint64(n)))} // #nosec G115 -- all three are positive
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
