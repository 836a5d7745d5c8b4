package sandbox

import (
	"context"
	"io"
	"os"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
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

// Extract unpacks src (a regular file the caller owns; usually one the init
// opened inside the sandbox) into the directory dest, by the init, inside
// the sandbox; a name deny refuses is refused. Refusals are
// *archive.Error; nothing is left behind then.
func (s *Sandbox) Extract(ctx context.Context, dest string, format archive.Format, lim archive.Limits, deny agent.Deny, src *os.File) (archive.Result, error) {
	inst, err := s.ensure(ctx)
	if err != nil {
		return archive.Result{}, err
	}
	s.touch()
	// The extractor runs in an execution group of its own, as a command:
	// it counts against the sandbox's pids limit with the commands, not
	// against the init's reserve.
	slot, err := s.acquireSlot()
	if err != nil {
		return archive.Result{}, err
	}
	defer s.endSlot(slot)
	return inst.ExtractIn(ctx, agent.TransferReq{Path: dest, Format: format, Limits: lim, Deny: deny}, src, slot.Attach, s.homeFor(slot.Attach))
}

// endSlot gives back the execution group of an extractor that ended:
// whatever it left running is killed before the group serves again.
func (s *Sandbox) endSlot(slot *execgroup.Group) {
	s.killLeftovers(slot)
	s.releaseSlot(slot)
}

// Pack streams the tree under dir as an archive, written by the init into
// a pipe (archive.Stream); a tree holding a name deny refuses is
// refused.
func (s *Sandbox) Pack(ctx context.Context, dir string, format archive.Format, lim archive.Limits, deny agent.Deny) (io.ReadCloser, error) {
	inst, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	s.touch()
	slot, err := s.acquireSlot() // as Extract's
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		s.releaseSlot(slot)
		return nil, err
	}
	p, finish := archive.NewStream(r)
	go func() {
		res, err := inst.PackIn(ctx, agent.TransferReq{Path: dir, Format: format, Limits: lim, Deny: deny}, w, slot.Attach, s.homeFor(slot.Attach))
		_ = w.Close()
		s.endSlot(slot)
		finish(res, err)
	}()
	return p, nil
}
