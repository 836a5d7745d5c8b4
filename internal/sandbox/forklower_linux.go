package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"github.com/sandhold/sandhold/internal/snapshot"
)

// Layered forks (forklower.go). On a file system without shared blocks
// (ext4), restoring a snapshot wrote a full copy of its image per sandbox
// (~120 MB for a 100 MB workspace): ten forks wrote ten. Instead:
//
//   - The snapshot's image is restored once per node into
//     <data>/fork-lowers/<snapshot>.img, its files' owners shifted from the
//     source sandbox's host ids to ids relative to 0 (the user namespace's
//     view), and mounted read-only (a read-only loop device, autoclear) for
//     as long as a sandbox's overlay uses it.
//   - Each sandbox made from it has an image of its own (upper.img, a
//     fresh file system of the snapshot's size: the quota, as for any
//     sandbox) holding upper/ and work/, and its /workspace is an overlay
//     mounted detached by the server: the lower layer is a clone of the
//     shared read-only mount, id-mapped to the sandbox's host ids, the
//     upper its own. What it writes (a copy-up included) goes into its own
//     image only; the lower is read-only for every mount of it.
//   - <workspace>/lower.json names the snapshot: a layered sandbox is one
//     with that marker and without a disk.img, so the layout comes back
//     after a restart.
//   - A snapshot of a layered sandbox, and its hibernation, copy the
//     overlay's merged view (cp -a) into a new image of the same size, so a
//     snapshot is always one whole image (exports, imports and restores
//     need nothing else). Hibernation replaces the sandbox's layers with
//     that image: the sandbox is then one of its own.
//   - Lifetime (a reference count): the lower stays mounted while an
//     overlay uses it and its image stays on the disk while the snapshot
//     exists or a sandbox's marker names it. Deleting the snapshot is
//     allowed; its forks keep their lower; the image goes with the last
//     of them.
//
// Templated snapshots keep the copy: their root's writable layer is an
// overlay's upper layer the init mounts, which cannot itself be stacked
// on a lower layer without the init's help.

const (
	// lowersDirName is the lower layers' directory in the data dir.
	lowersDirName = "fork-lowers"
	// lowerMarker names a layered sandbox's snapshot in its workspace dir.
	lowerMarker = "lower.json"
)

// errLowerGone: neither the node nor the store holds the snapshot.
var errLowerGone = fault.New(fault.Unavailable, "the sandbox's snapshot is gone")

// errNoForkOverlay: the host could not mount a fork's overlay (no
// id-mapped overlay, ptrace refused); see unlayerFresh.
var errNoForkOverlay = errors.New("fork overlay unavailable")

type lowerRef struct {
	Snapshot string `json:"snapshot"`
}

func (m *Manager) lowersDir() string { return filepath.Join(m.cfg.DataDir, lowersDirName) }

func (m *Manager) lowerPath(snap string) string { return filepath.Join(m.lowersDir(), snap+".img") }

// clonesImages tells whether the file system of dir (the workspaces)
// shares blocks: then a restore clones the snapshot's chunks (XFS with
// reflinks, btrfs) and forks are not layered.
func (m *Manager) clonesImages(dir string) bool {
	m.lowers.probe.Do(func() { m.lowers.clones = volume.SharesBlocks(dir) })
	return m.lowers.clones
}

// readLowerRef reads dir's marker.
func readLowerRef(dir string) (lowerRef, error) {
	var r lowerRef
	b, err := os.ReadFile(filepath.Join(dir, lowerMarker)) //nolint:gosec // G304: a file in the server's own data dir
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil || !snapshot.ValidID(r.Snapshot) {
		return r, fmt.Errorf("read %s: not a snapshot's marker", lowerMarker)
	}
	return r, nil
}

// layeredOn tells whether the workspace in dir is layered, on which
// snapshot: its marker is there and no disk.img (a flattened sandbox's
// image wins, and what its flattening left is removed).
func layeredOn(dir string) (string, bool, error) {
	if _, err := os.Lstat(filepath.Join(dir, volume.ImageName)); err == nil {
		for _, n := range []string{lowerMarker, upperImage} {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", false, fmt.Errorf("remove a flattened layer: %w", err)
			}
		}
		return "", false, nil
	}
	r, err := readLowerRef(dir)
	if err == nil {
		return r.Snapshot, true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	return "", false, err
}

// forkLayer is layeredOn, or, for a pending restore without a template on
// a file system that cannot share blocks, makes the workspace layered now
// (the marker written before anything else).
func (s *Sandbox) forkLayer(dir string, root *rootPlan) (string, bool, error) {
	if snap, layered, err := layeredOn(dir); err != nil || layered {
		return snap, layered, err
	}
	rs := s.rec.Restore
	if rs == nil || rs.Hibernated || root != nil || s.m.clonesImages(filepath.Dir(dir)) || s.m.lowers.off.Load() {
		return "", false, nil
	}
	b, err := json.Marshal(lowerRef{Snapshot: rs.Snapshot})
	if err != nil {
		return "", false, err
	}
	st, err := volume.StageCopy(filepath.Join(dir, lowerMarker), -1, true, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
	if err != nil {
		return "", false, fmt.Errorf("write %s: %w", lowerMarker, err)
	}
	if err := st.Commit(); err != nil {
		st.Abort()
		return "", false, fmt.Errorf("write %s: %w", lowerMarker, err)
	}
	return rs.Snapshot, true, nil
}

// mountLayered mounts a layered sandbox's workspace: its snapshot's lower
// (restored first if this node has none), its own image (made if new; its
// finish, if any, returned as for volume.Open) and the overlay of them.
// Callers hold s.mu.
func (s *Sandbox) mountLayered(ctx context.Context, dir, snap string, size int64, uid int, clk *stepClock) (finish func() error, err error) {
	base, err := s.m.acquireLower(ctx, snap)
	if err != nil {
		return nil, err
	}
	clk.mark("fork_lower")
	mnt, finish, err := volume.Open(filepath.Join(dir, upperImage), size, uid, &s.m.wst, s.m.templateDir(), s.m.log, clk)
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
	clk.mark("fork_overlay")
	s.vol, s.lower = mnt, &forkMount{snapshot: snap, ws: ws}
	s.rec.Restore = nil
	return finish, nil
}

// unlayerFresh undoes a new layered workspace whose first mount failed
// (nothing of the sandbox's is in it yet) so that its start restores a
// copy instead, and layers no more sandboxes in this run: the host cannot
// mount them (no id-mapped overlay, ptrace refused).
func (s *Sandbox) unlayerFresh(dir string, cause error) error {
	s.m.lowers.off.Store(true)
	s.m.log.Warn("forks cannot be layered on this host; they get a copy of their snapshot's image", "err", cause)
	for _, n := range []string{lowerMarker, upperImage, upperImage + volume.TmpSuffix} {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", n, err)
		}
	}
	return volume.SyncDir(dir)
}

// ensureLayeredLocked mounts a layered sandbox's workspace if it is not
// mounted in this run (a snapshot or hibernation of a stopped sandbox);
// it tells whether the sandbox is layered. Callers hold s.mu.
func (s *Sandbox) ensureLayeredLocked(ctx context.Context) (bool, error) {
	if s.lower != nil {
		return true, nil
	}
	dir := s.workspaceDir()
	snap, layered, err := layeredOn(dir)
	if err != nil || !layered || s.vol != nil {
		return false, err
	}
	finish, err := s.mountLayered(ctx, dir, snap, max(s.diskBytes(), volume.MinBytes), int(hostBase(s.rec.Slot))+sandboxUID, nil)
	if err == nil && finish != nil {
		err = finish()
	}
	return err == nil, err
}

// acquireLower returns snapshot snap's lower layer mounted read-only,
// restoring its image first if needed; each call is matched by a
// releaseLower.
func (m *Manager) acquireLower(ctx context.Context, snap string) (*os.File, error) {
	l := &m.lowers
	l.mu.Lock()
	if l.bases == nil {
		l.bases = make(map[string]*lowerBase)
	}
	b := l.bases[snap]
	if b != nil {
		b.refs++
		l.mu.Unlock()
		<-b.ready
		if b.err != nil {
			return nil, b.err
		}
		return b.mnt, nil
	}
	b = &lowerBase{ready: make(chan struct{}), refs: 1}
	l.bases[snap] = b
	l.mu.Unlock()
	mnt, err := m.openLower(ctx, snap)
	l.mu.Lock()
	b.mnt, b.err = mnt, err
	if err != nil && l.bases[snap] == b {
		delete(l.bases, snap)
	}
	close(b.ready)
	l.mu.Unlock()
	return mnt, err
}

// releaseLower drops one use of snap's lower; the last unmounts it (its
// loop device detaches with the last overlay on it) and says so. It takes
// no sandbox's lock and no manager's (callers may hold s.mu).
func (m *Manager) releaseLower(snap string) (last bool) {
	l := &m.lowers
	l.mu.Lock()
	b := l.bases[snap]
	var mnt *os.File
	if b != nil {
		if b.refs--; b.refs <= 0 {
			delete(l.bases, snap)
			mnt, last = b.mnt, true
		}
	}
	l.mu.Unlock()
	if mnt != nil {
		_ = mnt.Close()
	}
	return last
}

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
	dir := m.lowersDir()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return
	}
	named := make(map[string]bool)
	for _, s := range m.All() {
		if r, err := readLowerRef(s.workspaceDir()); err == nil {
			named[r.Snapshot] = true
		}
	}
	st := m.cfg.Snapshots
	l := &m.lowers
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range entries {
		if i >= diskbudget.MaxImageScan {
			break
		}
		id, _, _ := strings.Cut(e.Name(), ".")
		if l.bases[id] != nil || named[id] {
			continue
		}
		if st != nil && strings.HasSuffix(e.Name(), ".img") {
			if _, err := st.Get("", true, id); !errors.Is(err, snapshot.ErrNotFound) {
				continue // kept (or unreadable: kept)
			}
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Error("remove a fork lower layer", "file", e.Name(), "err", err)
		}
	}
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
	l := &s.m.lowers
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bases[lower.snapshot]
	if b == nil || b.mnt == nil {
		return 0
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(b.mnt.Fd()), &st); err != nil { //nolint:gosec // G115: a descriptor number
		return 0
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize // #nosec G115 -- block counts of one image, far below 2^63
}

// lowerUsage is what the lower images hold on the disk.
func (m *Manager) lowerUsage() int64 { return diskbudget.EntriesBytes(m.lowersDir()) }

// openLower mounts snap's lower image read-only, restoring it first.
func (m *Manager) openLower(ctx context.Context, snap string) (*os.File, error) {
	p := m.lowerPath(snap)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		if err := m.materializeLower(ctx, snap, p); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("open fork lower: %w", err)
	}
	return volume.MountReadOnly(p)
}

// materializeLower restores snapshot snap's image to p, its owners
// shifted to ids relative to 0 (what each sandbox's id-mapped mount maps
// to its own), made durable under p only once complete.
func (m *Manager) materializeLower(ctx context.Context, snap, p string) error {
	st, err := m.snapStore()
	if err != nil {
		return err
	}
	man, err := st.Get("", true, snap)
	if errors.Is(err, snapshot.ErrNotFound) {
		return errLowerGone
	}
	if err != nil {
		return err
	}
	var meta snapMeta
	if err := json.Unmarshal(man.Meta, &meta); err != nil {
		return fmt.Errorf("snapshot %s settings: %w", man.ID, err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("create fork lowers: %w", err)
	}
	work := p + ".new"
	if err := os.Remove(work); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale fork lower: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(work)
		}
	}()
	if err := st.Restore(ctx, man, work); err != nil {
		return err
	}
	vol, _, err := volume.Mount(work, true, nil)
	if err != nil {
		return err
	}
	err = volume.ShiftIDs(vol, meta.HostBase, 0)
	if err == nil {
		err = volume.SyncFS(vol)
	}
	_ = vol.Close()
	if err != nil {
		return fmt.Errorf("fork lower: %w", err)
	}
	if err := volume.WaitDetached(work); err != nil {
		return err
	}
	if err := os.Rename(work, p); err != nil {
		return fmt.Errorf("fork lower: %w", err)
	}
	ok = true
	return volume.SyncDir(filepath.Dir(p))
}

// forkOverlay is volume.MountForkOverlay (a test makes it fail).
var forkOverlay = volume.MountForkOverlay

// flattenLocked copies the layered sandbox's merged view (its overlay)
// into a new image of the sandbox's size, staged as dst's temporary copy
// and unmounted when it returns. Callers hold s.mu with the sandbox's
// processes frozen or gone.
func (s *Sandbox) flattenLocked(ctx context.Context, dst string) (_ *volume.Staged, err error) {
	if s.lower == nil {
		return nil, errors.New("not a layered workspace")
	}
	size := max(s.diskBytes(), volume.MinBytes)
	st, err := volume.Make(dst, size, int(hostBase(s.rec.Slot))+sandboxUID, &s.m.wst, s.m.templateDir(), s.m.log, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Abort()
		}
	}()
	mnt, _, err := volume.Mount(st.Tmp(), true, nil)
	if err != nil {
		return nil, err
	}
	_ = unix.Unlinkat(int(mnt.Fd()), "lost+found", unix.AT_REMOVEDIR) //nolint:gosec // G115: a descriptor number
	err = volume.CopyTree(ctx, s.lower.ws, mnt)
	if err == nil {
		err = volume.SyncFS(mnt)
	}
	_ = mnt.Close()
	if err != nil && fault.KindOf(err) == fault.Internal {
		err = fmt.Errorf("copy the fork's merged workspace: %w", err)
	}
	if err != nil {
		return nil, err
	}
	if err := volume.WaitDetached(st.Tmp()); err != nil {
		return nil, err
	}
	return st, nil
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
	if err := os.Remove(filepath.Join(dir, lowerMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", lowerMarker, err)
	}
	upper := filepath.Join(dir, upperImage)
	if err := volume.WaitDetached(upper); err != nil {
		return err
	}
	if err := os.Remove(upper); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", upperImage, err)
	}
	s.m.collectLowers()
	return volume.SyncDir(dir)
}
