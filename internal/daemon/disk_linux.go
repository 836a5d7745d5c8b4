package daemon

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// The disk guard's floor: the data dir's free space it keeps for the
// store, the audit log and the host, whatever the budget says — the
// larger of diskFloorMin and diskFloorPercent of the file system.
const (
	diskFloorMin     = 1 << 30
	diskFloorPercent = 1
)

// hostDisk is the data dir's file system as the disk budget sees it.
type hostDisk struct {
	// Budget is what the workspace images may hold (SANDBOX_DISK_BUDGET):
	// the configured value, or config.DefaultDiskBudgetPercent of what the
	// file system has free now plus what the existing images already hold
	// (their blocks are not free any more, but they are part of the
	// budget).
	Budget int64
	// Free is the file system's free space now.
	Free int64
	// Floor is the free space under which the guard stops growth.
	Floor int64
}

func diskBudget(cfg config.Config) (hostDisk, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cfg.DataDir, &st); err != nil {
		return hostDisk{}, fmt.Errorf("statfs data dir: %w", err)
	}
	// #nosec G115 -- block counts of a real file system fit in int64
	free, size := int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize
	d := hostDisk{Free: free, Floor: max(diskFloorMin, size/100*diskFloorPercent), Budget: cfg.DiskBudget.Bytes()}
	if d.Budget <= 0 {
		d.Budget = (free + sandbox.ImageBytes(cfg.DataDir)) / 100 * config.DefaultDiskBudgetPercent
	}
	return d, nil
}

// freeBytes is what the file system holding dir has free for an
// unprivileged writer.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs data dir: %w", err)
	}
	return int64(st.Bavail) * st.Bsize, nil // #nosec G115 -- block counts of a real file system fit in int64
}
