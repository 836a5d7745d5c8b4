package sandbox

import (
	"fmt"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/sandhold/sandhold/internal/fault"
)

// The disk guard is what makes an over-committed disk budget safe (thin
// provisioning's low-water mark). Workspace images are sparse: a fresh 5 GB
// workspace takes about 110 KiB of the host's disk, a Python venv 25 MB,
// and deleted files are punched out of the image again (online discard).
// So the quotas may promise SANDBOX_DISK_OVERCOMMIT times the budget
// (disk.go), and the guard keeps what the images really hold within it:
// every diskGuardEvery it reads the blocks the images hold and the data
// dir's free space, and growth stops when the images reach the budget or
// the free space falls under the floor kept for the store, the audit log
// and the host (Config.DiskFloor):
//
//   - every mounted workspace file system is clamped where it stands: its
//     ext4 reserved_clusters (a per-mount count nobody, root included, may
//     allocate into) is set to its free blocks, so a write that needs a new
//     block gets ENOSPC from the kernel while deleting, truncating and
//     rewriting in place still work;
//   - creates are refused (409) with a message saying what to free.
//
// Growth resumes once both figures are back a margin (resumeGap) inside
// their bounds: the clamps are lifted and creates admitted again. Between
// two readings the images can grow past the budget by what sandboxes write
// in diskGuardEvery; that overshoot lands in the floor, not on a full disk.

// Periods and margins of the guard with their reasons.
const (
	// diskGuardEvery is how often the guard reads the disk: a stat per
	// image and one statfs, cheap even for thousands of sandboxes.
	diskGuardEvery = 2 * time.Second
	// maxResumeGap bounds the hysteresis: growth resumes this far (or a
	// tenth of the bound, if smaller) inside the budget and above the
	// floor, so a sandbox that deletes a few files does not flip it back
	// and forth.
	maxResumeGap = 256 << 20
)

// diskReading is one look at the host's disk.
type diskReading struct {
	// Images are the bytes the workspace images hold on the host (their
	// allocated blocks, not their sizes).
	Images int64
	// Free is what the data dir's file system has free for the server.
	Free int64
}

// diskGuard is the manager's guard state.
type diskGuard struct {
	// check serialises readings and the clamps they lead to.
	check sync.Mutex

	mu sync.Mutex
	// stopped says why growth is stopped; "" while there is room.
	stopped string
	last    diskReading
}

// resumeGap is the hysteresis for a bound v.
func resumeGap(v int64) int64 { return min(maxResumeGap, v/10) }

// diskVerdict says why growth must stop after reading r ("" when it need
// not), given the budget and the floor (0: none) and whether it is stopped
// now.
func diskVerdict(r diskReading, budget, floor int64, stopped bool) string {
	switch {
	case budget > 0 && r.Images >= budget:
		return fmt.Sprintf("the workspaces hold %s on the host, the whole disk budget of %s", iBytes(r.Images), iBytes(budget))
	case floor > 0 && r.Free < floor:
		return fmt.Sprintf("the server's disk has %s free, under the %s kept for the server itself", iBytes(r.Free), iBytes(floor))
	case !stopped:
		return ""
	case budget > 0 && r.Images > budget-resumeGap(budget):
		return fmt.Sprintf("the workspaces hold %s on the host, within %s of the disk budget of %s", iBytes(r.Images), iBytes(resumeGap(budget)), iBytes(budget))
	case floor > 0 && r.Free < floor+resumeGap(floor):
		return fmt.Sprintf("the server's disk has %s free, within %s of the %s kept for the server itself", iBytes(r.Free), iBytes(resumeGap(floor)), iBytes(floor))
	}
	return ""
}

func iBytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) } // #nosec G115 -- not negative

// diskRefusal is the 409 of a create while growth is stopped; nil while
// there is room.
func (m *Manager) diskRefusal() error {
	m.guard.mu.Lock()
	why := m.guard.stopped
	m.guard.mu.Unlock()
	if why == "" {
		return nil
	}
	return &fault.Error{Kind: fault.Conflict, Field: "limits.disk", Msg: why +
		": workspaces cannot grow and no sandbox is created until space is freed; delete sandboxes or files in them (the operator can raise SANDBOX_DISK_BUDGET or give the server's data dir more space)"}
}

// watchDisk runs the guard until the manager stops.
func (m *Manager) watchDisk() { m.every(diskGuardEvery, m.checkDisk) }

// checkDisk reads the disk once and stops or resumes growth accordingly;
// while stopped it also clamps volumes mounted since the last reading.
func (m *Manager) checkDisk() {
	m.guard.check.Lock()
	defer m.guard.check.Unlock()
	r, err := readDisk(m.cfg.DataDir, m.workspaceRoot())
	if err != nil {
		m.log.Error("disk guard: read the disk", "err", err)
		return
	}
	if m.cfg.Templates != nil {
		// Templates' layers count against the budget with the images.
		r.Images += m.cfg.Templates.Usage()
	}
	// So do the snapshots.
	r.Images += m.snapshotUsage()
	m.guard.mu.Lock()
	was := m.guard.stopped
	why := diskVerdict(r, m.cfg.DiskBudget, m.cfg.DiskFloor, was != "")
	m.guard.stopped, m.guard.last = why, r
	m.guard.mu.Unlock()
	switch {
	case why != "" && was == "":
		m.log.Warn("disk guard: workspace growth stopped", "reason", why, "images_bytes", r.Images, "free_bytes", r.Free,
			"budget_bytes", m.cfg.DiskBudget, "floor_bytes", m.cfg.DiskFloor)
	case why == "" && was != "":
		m.log.Info("disk guard: workspace growth resumed", "images_bytes", r.Images, "free_bytes", r.Free)
	}
	stop := why != ""
	for _, s := range m.volumeHolders() {
		var err error
		if stop {
			err = s.clampVolume()
		} else {
			err = s.unclampVolume()
		}
		if err != nil {
			m.log.Error("disk guard: clamp a workspace", "sandbox", s.rec.ID, "stop", stop, "err", err)
		}
	}
}

// volumeHolders are the listed sandboxes and the warm pool's.
func (m *Manager) volumeHolders() []*Sandbox {
	all := m.All()
	for _, p := range m.pools {
		p.mu.Lock()
		all = append(all, p.ready...)
		p.mu.Unlock()
	}
	return all
}

// DiskGuard reports the guard's last reading and why growth is stopped
// ("" when it is not), for metrics and the resources view.
func (m *Manager) DiskGuard() (imagesBytes, freeBytes int64, stopped string) {
	m.guard.mu.Lock()
	defer m.guard.mu.Unlock()
	return m.guard.last.Images, m.guard.last.Free, m.guard.stopped
}
