package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/forklower"
	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"github.com/sandhold/sandhold/internal/snapshot"
)

// Layered forks: a fork of a snapshot on a file system without shared
// blocks gets the snapshot's lower layer (internal/sandbox/forklower,
// which says the layout) and an overlay on it whose upper layer is an
// image of its own; this file mounts and unmounts a sandbox's layers.

// errNoForkOverlay: the host could not mount a fork's overlay (no
// id-mapped overlay, ptrace refused); see unlayerFresh.
var errNoForkOverlay = errors.New("fork overlay unavailable")

func (m *Manager) lowersDir() string { return filepath.Join(m.cfg.DataDir, forklower.DirName) }

// forkLayer is forklower.LayeredOn, or, for a pending restore without a
// template on a file system that cannot share blocks, makes the workspace
// layered now (the marker written before anything else).
func (s *Sandbox) forkLayer(dir string, root *templateroot.Plan) (string, bool, error) {
	if snap, layered, err := forklower.LayeredOn(dir); err != nil || layered {
		return snap, layered, err
	}
	rs := s.rec.Restore
	if rs == nil || rs.Hibernated || root != nil || s.m.lowers.Clones(filepath.Dir(dir)) || s.m.lowers.Disabled() {
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
	base, err := s.m.lowers.Acquire(ctx, s.m.lowersDir(), snap, s.m.findLower)
	if err != nil {
		return nil, err
	}
	clk.Mark("fork_lower")
	mnt, finish, err := volume.Open(filepath.Join(dir, forklower.UpperImage), size, uid, &s.m.wst, s.m.templateDir(), s.m.log, clk)
	if err != nil {
		s.m.releaseLower(snap)
		return nil, err
	}
	ws, err := forkOverlay(base, mnt, hostBase(s.rec.Slot))
	if err != nil {
		err = fmt.Errorf("%w: %w", errNoForkOverlay, err)
		if finish != nil {
			_ = finish()
		}
		_ = mnt.Close()
		s.m.releaseLower(snap)
		return nil, err
	}
	clk.Mark("fork_overlay")
	s.vol, s.lower = mnt, &forkMount{snapshot: snap, ws: ws}
	s.rec.Restore = nil
	return finish, nil
}

// unlayerFresh undoes a new layered workspace whose first mount failed
// (nothing of the sandbox's is in it yet) so that its start restores a
// copy instead, and layers no more sandboxes in this run: the host cannot
// mount them (no id-mapped overlay, ptrace refused).
func (s *Sandbox) unlayerFresh(dir string, cause error) error {
	s.m.lowers.Disable()
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

// releaseLower drops one use of snap's lower (forklower.Lowers.Release).
func (m *Manager) releaseLower(snap string) (last bool) { return m.lowers.Release(snap) }

// dropLower closes a layered sandbox's overlay and releases its lower;
// the last use of a lower collects the images no snapshot and no sandbox
// needs. Callers hold no sandbox's lock (collectLowers lists them).
func (m *Manager) dropLower(f *forkMount) {
	if f == nil {
		return
	}
	_ = f.ws.Close()
	if m.releaseLower(f.snapshot) {
		m.collectLowers()
	}
}

// collectLowers removes the lower images that no mounted overlay uses, no
// snapshot in the store keeps and no listed sandbox's marker names.
func (m *Manager) collectLowers() {
	st := m.cfg.Snapshots
	m.lowers.Collect(m.lowersDir(), func() map[string]bool {
		named := make(map[string]bool)
		for _, s := range m.All() {
			if snap, err := forklower.ReadMarker(s.workspaceDir()); err == nil {
				named[snap] = true
			}
		}
		return named
	}, func(snap string) bool {
		if st == nil {
			return false
		}
		_, err := st.Get("", true, snap)
		return !errors.Is(err, snapshot.ErrNotFound) // kept (or unreadable: kept)
	}, m.log)
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
	return s.m.lowers.Bytes(lower.snapshot)
}

// lowerUsage is what the lower images hold on the disk.
func (m *Manager) lowerUsage() int64 { return diskbudget.EntriesBytes(m.lowersDir()) }

// findLower finds snapshot snap for its lower layer (forklower.Find).
func (m *Manager) findLower(snap string) (func(context.Context, string) error, uint32, error) {
	st, err := m.snapStore()
	if err != nil {
		return nil, 0, err
	}
	man, err := st.Get("", true, snap)
	if errors.Is(err, snapshot.ErrNotFound) {
		return nil, 0, forklower.ErrGone
	}
	if err != nil {
		return nil, 0, err
	}
	var meta snapMeta
	if err := json.Unmarshal(man.Meta, &meta); err != nil {
		return nil, 0, fmt.Errorf("snapshot %s settings: %w", man.ID, err)
	}
	return func(ctx context.Context, dst string) error { return st.Restore(ctx, man, dst) }, meta.HostBase, nil
}

// forkOverlay is volume.MountForkOverlay (a test makes it fail).
var forkOverlay = volume.MountForkOverlay

// flattenLocked copies the layered sandbox's merged view (its overlay)
// into a new image of the sandbox's size, staged as dst's temporary copy
// and unmounted when it returns. Callers hold s.mu with the sandbox's
// processes frozen or gone.
func (s *Sandbox) flattenLocked(ctx context.Context, dst string) (*volume.Staged, error) {
	if s.lower == nil {
		return nil, errors.New("not a layered workspace")
	}
	return forklower.Flatten(ctx, s.lower.ws, dst, max(s.diskBytes(), volume.MinBytes), int(hostBase(s.rec.Slot))+sandboxUID, &s.m.wst, s.m.templateDir(), s.m.log)
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
	s.m.collectLowers()
	return volume.SyncDir(dir)
}
