package sandbox

// The disk budget's promises (SANDBOX_DISK_BUDGET × SANDBOX_DISK_OVERCOMMIT)
// are counted by the manager's diskbudget.Ledger: the listed sandboxes'
// quotas (index.go), the warm pool's ready sandboxes' (pool.go) and those
// of sandboxes being made (reserveDisk).

// reserveDisk claims n bytes of the promise cap for a sandbox being made
// (by a create, or by the warm pool): diskbudget.Ledger.Reserve. The
// caller calls the returned release once the sandbox is listed (in
// m.sandboxes), or made nothing; the pool hands its reservation to the
// pool's count instead (makePooled). While the guard stops growth, it
// refuses with a conflict (409) that says what would make room.
func (m *Manager) reserveDisk(n int64) (release func(), err error) {
	if err := m.guard.Refusal(); err != nil {
		return nil, err
	}
	return m.disk.Reserve(n, m.cfg.DiskBudget, m.cfg.DiskOvercommit)
}

// DiskCommitted is the sum of the workspace quotas promised now (recorded
// sandboxes, the warm pool, sandboxes being made), for metrics and tests.
func (m *Manager) DiskCommitted() int64 { return m.disk.Committed() }
