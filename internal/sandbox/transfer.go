package sandbox

import (
	"context"
)

// poolDisk reports whether a pool sandbox can serve spec's disk quota: a
// pool workspace is a file system of the default size (quota_linux.go),
// which cannot shrink while mounted, so other sizes are built cold.
func (m *Manager) poolDisk(spec Spec) bool {
	d := spec.Limits.DiskBytes
	return d == 0 || d == m.cfg.Default.DiskBytes
}

// DiskLimit is the sandbox's workspace quota in bytes.
func (s *Sandbox) DiskLimit() int64 { return s.diskBytes() }

// StatFS reports the size and free bytes of the file system holding path
// inside the sandbox (for /workspace: the quota and what is left of it).
func (s *Sandbox) StatFS(ctx context.Context, path string) (total, free int64, err error) {
	inst, err := s.ensure(ctx)
	if err != nil {
		return 0, 0, err
	}
	return inst.StatFS(ctx, path)
}
