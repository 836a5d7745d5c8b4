package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/config"
)

// diskBudget is the sum of workspace quotas the server may promise
// (SANDBOX_DISK_BUDGET): the configured value, or
// config.DefaultDiskBudgetPercent of what the data dir's file system has
// free now plus what the existing workspace images already hold (their
// blocks are not free any more, but they are part of what was promised).
func diskBudget(cfg config.Config) (budget, free int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cfg.DataDir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs data dir: %w", err)
	}
	free = int64(st.Bavail) * st.Bsize // #nosec G115 -- block counts of a real file system fit in int64
	if cfg.DiskBudget > 0 {
		return cfg.DiskBudget.Bytes(), free, nil
	}
	return (free + workspaceBytes(cfg.DataDir)) / 100 * config.DefaultDiskBudgetPercent, free, nil
}

// maxWorkspaceScan bounds the directories looked at (far more than the
// sandboxes one server keeps: 16,000 id slots).
const maxWorkspaceScan = 20000

// workspaceBytes sums the allocated bytes of the workspace images
// (workspaces/<id>/disk.img), one stat each.
func workspaceBytes(dataDir string) int64 {
	root := filepath.Join(dataDir, "workspaces")
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	var n int64
	for i, e := range entries {
		if i >= maxWorkspaceScan {
			break
		}
		fi, err := os.Stat(filepath.Join(root, e.Name(), "disk.img"))
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
	}
	return n
}
