package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/sandhold/sandhold/internal/sandbox/forklower"
	"github.com/sandhold/sandhold/internal/sandbox/snapkeep"
	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

// Layered forks: a fork of a snapshot on a file system without shared
// blocks gets the snapshot's lower layer (internal/sandbox/forklower,
// which says the layout) and an overlay on it whose upper layer is an
// image of its own; this file mounts and unmounts a sandbox's layers.

// errNoForkOverlay: the host could not mount a fork's overlay; see
// unlayerFresh.
var errNoForkOverlay = snapkeep.ErrNoOverlay

// forkLayer is forklower.LayeredOn, or, for a pending restore without a
// template on a file system that cannot share blocks, makes the workspace
// layered now (the marker written before anything else).
func (s *Sandbox) forkLayer(dir string, root *templateroot.Plan) (string, bool, error) {
	if snap, layered, err := forklower.LayeredOn(dir); err != nil || layered {
		return snap, layered, err
	}
	rs := s.rec.Restore
	if rs == nil || rs.Hibernated || root != nil || !s.m.snaps.Layerable(filepath.Dir(dir)) {
		return "", false, nil
	}
	if err := forklower.WriteMarker(dir, rs.Snapshot); err != nil {
		return "", false, err
	}
	return rs.Snapshot, true, nil
}

// mountLayered mounts a layered sandbox's workspace: its snapshot's lower
// (restored first if this node has none), its own image (made if new; its
// finish, if any, returned as for volume.Open) and the overlay of them.
// Callers hold s.mu.
func (s *Sandbox) mountLayered(ctx context.Context, dir, snap string, size int64, uid int, clk *startsteps.Clock) (finish func() error, err error) {
	mnt, l, finish, err := s.m.snaps.MountLayers(ctx, dir, snap, hostBase(s.rec.Slot), func(img string) (*os.File, func() error, error) {
		return volume.Open(img, size, uid, &s.m.wst, s.m.templateDir(), s.m.log, clk)
	}, clk)
	if err != nil {
		return nil, err
	}
	s.vol, s.lower = mnt, l
	s.rec.Restore = nil
	return finish, nil
}

// unlayerFresh undoes a new layered workspace whose first mount failed
// (nothing of the sandbox's is in it yet) so that its start restores a
// copy instead, and layers no more sandboxes in this run: the host cannot
// mount them (no id-mapped overlay, ptrace refused).
func (s *Sandbox) unlayerFresh(dir string, cause error) error {
	s.m.snaps.DisableLayers()
	s.m.log.Warn("forks cannot be layered on this host; they get a copy of their snapshot's image", "err", cause)
	return forklower.RemoveFresh(dir)
}

// ensureLayeredLocked mounts a layered sandbox's workspace if it is not
// mounted in this run (a snapshot or hibernation of a stopped sandbox);
// it tells whether the sandbox is layered. Callers hold s.mu.
func (s *Sandbox) ensureLayeredLocked(ctx context.Context) (bool, error) {
	if s.lower != nil {
		return true, nil
	}
	dir := s.workspaceDir()
	snap, layered, err := forklower.LayeredOn(dir)
	if err != nil || !layered || s.vol != nil {
		return false, err
	}
	finish, err := s.mountLayered(ctx, dir, snap, max(s.diskBytes(), volume.MinBytes), int(hostBase(s.rec.Slot))+sandboxUID, nil)
	if err == nil && finish != nil {
		err = finish()
	}
	return err == nil, err
}

// lowerBytes is what a layered sandbox's lower file system holds (its
// own image's use is diskUsage): with it, what a snapshot of its merged
// view may need. 0 for any other sandbox.
func (s *Sandbox) lowerBytes() int64 {
	s.mu.Lock()
	lower := s.lower
	s.mu.Unlock()
	if lower == nil {
		return 0
	}
	return s.m.snaps.LowerBytes(lower.Snapshot)
}

// forkOverlay is volume.MountForkOverlay, the keep's Overlay (a test makes
// it fail).
var forkOverlay = volume.MountForkOverlay

// flattenLocked copies the layered sandbox's merged view (its overlay)
// into a new image of the sandbox's size, staged as dst's temporary copy
// and unmounted when it returns. Callers hold s.mu with the sandbox's
// processes frozen or gone.
func (s *Sandbox) flattenLocked(ctx context.Context, dst string) (*volume.Staged, error) {
	if s.lower == nil {
		return nil, errors.New("not a layered workspace")
	}
	return forklower.Flatten(ctx, s.lower.WS, dst, max(s.diskBytes(), volume.MinBytes), int(hostBase(s.rec.Slot))+sandboxUID, &s.m.wst, s.m.templateDir(), s.m.log)
}

// unlayer makes a layered sandbox one of its own before it hibernates:
// its merged view becomes its disk.img, its marker and upper image go,
// its lower is released. Nothing of it runs.
func (s *Sandbox) unlayer(ctx context.Context) error {
	s.mu.Lock()
	layered, err := s.ensureLayeredLocked(ctx)
	if err != nil || !layered {
		s.mu.Unlock()
		return err
	}
	st, err := s.flattenLocked(ctx, s.imagePath())
	if err == nil {
		if err = st.Commit(); err != nil {
			st.Abort()
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// disk.img is durable: from here on the sandbox is one of its own
	// (forkLayer removes the rest if a crash comes first).
	s.releaseVolume()
	dir := s.workspaceDir()
	if err := forklower.RemoveLayers(dir); err != nil {
		return err
	}
	s.m.snaps.CollectLowers()
	return volume.SyncDir(dir)
}
