package sandbox

import (
	"sort"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// Stats are one sandbox's live figures.
type Stats struct {
	ID      string       `json:"id"`
	State   State        `json:"state"`
	Cgroup  cgroup.Stats `json:"cgroup"`
	Network NetCounters  `json:"network" doc:"egress through the proxy (network.mode proxy)"`
	Disk    DiskUsage    `json:"disk" doc:"the workspace file system (the kernel-enforced quota), as statfs reports it"`
}

// DiskUsage is the workspace file system's use: bytes in use and its size
// (the quota). Zero while the sandbox's workspace is not mounted.
type DiskUsage struct {
	UsedBytes  int64 `json:"used_bytes"`
	TotalBytes int64 `json:"total_bytes"`
}

// Resources returns live cgroup figures for the caller's running sandboxes.
func (m *Manager) Resources(c Caller) []Stats {
	var out []Stats
	for _, s := range m.All() {
		if !c.Admin && s.rec.Owner != c.KeyID {
			continue
		}
		st := Stats{ID: s.rec.ID, State: s.State(), Network: m.NetStats(s.rec.ID), Disk: s.diskUsage()}
		if g := s.cgroupGroup(); g != nil {
			if cs, err := g.Stats(); err == nil {
				st.Cgroup = cs
			}
		}
		// Processes are reported against the user's budget (the user
		// group), not the sandbox group's, which includes the init.
		if u := s.userGroup(); u != nil {
			if us, err := u.Stats(); err == nil {
				st.Cgroup.Pids, st.Cgroup.PidsLimit = us.Pids, us.PidsLimit
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
