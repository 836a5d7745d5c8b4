package forklower

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
	"github.com/sandhold/sandhold/internal/snapshot"
)

// Path is snapshot snap's lower image in dir (the lowers' directory).
func Path(dir, snap string) string { return filepath.Join(dir, snap+".img") }

// Clones tells whether the file system of dir (the workspaces) shares
// blocks: then a restore clones the snapshot's chunks (XFS with reflinks,
// btrfs) and forks are not layered. The first answer holds for the run.
func (l *Lowers) Clones(dir string) bool {
	l.probe.Do(func() { l.clones = volume.SharesBlocks(dir) })
	return l.clones
}

// SetClones fixes Clones' answer before its first probe (a bench
// measures each storage whatever the file system says).
func (l *Lowers) SetClones(v bool) { l.probe.Do(func() { l.clones = v }) }

type marker struct {
	Snapshot string `json:"snapshot"`
}

// ReadMarker reads dir's marker: the snapshot a layered workspace is on.
func ReadMarker(dir string) (string, error) {
	var r marker
	b, err := os.ReadFile(filepath.Join(dir, Marker)) //nolint:gosec // G304: a file in the server's own data dir
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &r); err != nil || !snapshot.ValidID(r.Snapshot) {
		return "", fmt.Errorf("read %s: not a snapshot's marker", Marker)
	}
	return r.Snapshot, nil
}

// WriteMarker makes the workspace in dir layered on snapshot snap (before
// anything else of it is written), durably.
func WriteMarker(dir, snap string) error {
	b, err := json.Marshal(marker{Snapshot: snap})
	if err != nil {
		return err
	}
	st, err := volume.StageCopy(filepath.Join(dir, Marker), -1, true, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", Marker, err)
	}
	if err := st.Commit(); err != nil {
		st.Abort()
		return fmt.Errorf("write %s: %w", Marker, err)
	}
	return nil
}

// LayeredOn tells whether the workspace in dir is layered, on which
// snapshot: its marker is there and no disk.img (a flattened sandbox's
// image wins, and what its flattening left is removed).
func LayeredOn(dir string) (string, bool, error) {
	if _, err := os.Lstat(filepath.Join(dir, volume.ImageName)); err == nil {
		for _, n := range []string{Marker, UpperImage} {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", false, fmt.Errorf("remove a flattened layer: %w", err)
			}
		}
		return "", false, nil
	}
	snap, err := ReadMarker(dir)
	if err == nil {
		return snap, true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	return "", false, err
}

// RemoveFresh undoes a new layered workspace in dir whose first mount
// failed (nothing of the sandbox's is in it yet): its marker and upper
// image go, durably.
func RemoveFresh(dir string) error {
	for _, n := range []string{Marker, UpperImage, UpperImage + volume.TmpSuffix} {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", n, err)
		}
	}
	return volume.SyncDir(dir)
}

// RemoveLayers removes a flattened workspace's marker and, once its loop
// device is gone, its upper image: its disk.img is what it is now.
func RemoveLayers(dir string) error {
	if err := os.Remove(filepath.Join(dir, Marker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", Marker, err)
	}
	upper := filepath.Join(dir, UpperImage)
	if err := volume.WaitDetached(upper); err != nil {
		return err
	}
	if err := os.Remove(upper); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", UpperImage, err)
	}
	return nil
}

// Acquire returns snapshot snap's lower layer (in dir) mounted read-only,
// restoring its image first (find) if needed; each call is matched by a
// Release.
func (l *Lowers) Acquire(ctx context.Context, dir, snap string, find Find) (*os.File, error) {
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
	mnt, err := open(ctx, Path(dir, snap), snap, find)
	l.mu.Lock()
	b.mnt, b.err = mnt, err
	if err != nil && l.bases[snap] == b {
		delete(l.bases, snap)
	}
	close(b.ready)
	l.mu.Unlock()
	return mnt, err
}

// Release drops one use of snap's lower; the last unmounts it (its loop
// device detaches with the last overlay on it) and says so. It takes no
// lock but the lowers' own.
func (l *Lowers) Release(snap string) (last bool) {
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

// Collect removes the lower images in dir that no mounted overlay uses,
// no sandbox's marker names (named, asked once there are images) and the
// store does not keep (kept).
func (l *Lowers) Collect(dir string, named func() map[string]bool, kept func(snap string) bool, log *slog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return
	}
	marked := named()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range entries {
		if i >= diskbudget.MaxImageScan {
			break
		}
		id, _, _ := strings.Cut(e.Name(), ".")
		if l.bases[id] != nil || marked[id] {
			continue
		}
		if strings.HasSuffix(e.Name(), ".img") && kept(id) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Error("remove a fork lower layer", "file", e.Name(), "err", err)
		}
	}
}

// Bytes is what snapshot snap's mounted lower file system holds (0 when
// it is not mounted).
func (l *Lowers) Bytes(snap string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bases[snap]
	if b == nil || b.mnt == nil {
		return 0
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(b.mnt.Fd()), &st); err != nil { //nolint:gosec // G115: a descriptor number
		return 0
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize // #nosec G115 -- block counts of one image, far below 2^63
}

// open mounts snap's lower image p read-only, restoring it first.
func open(ctx context.Context, p, snap string, find Find) (*os.File, error) {
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		if err := materialize(ctx, snap, p, find); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("open fork lower: %w", err)
	}
	return volume.MountReadOnly(p)
}

// materialize restores snapshot snap's image to p, its owners shifted to
// ids relative to 0 (what each sandbox's id-mapped mount maps to its own),
// made durable under p only once complete.
func materialize(ctx context.Context, snap, p string, find Find) error {
	restore, fromBase, err := find(snap)
	if err != nil {
		return err
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
	if err := restore(ctx, work); err != nil {
		return err
	}
	vol, _, err := volume.Mount(work, true, nil)
	if err != nil {
		return err
	}
	err = volume.ShiftIDs(vol, fromBase, 0)
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

// Flatten copies a layered workspace's merged view (its overlay ws) into
// a new image of size bytes owned by uid, staged as dst's temporary copy
// and unmounted when it returns. Its caller keeps the sandbox's processes
// frozen or gone.
func Flatten(ctx context.Context, ws *os.File, dst string, size int64, uid int, tm *volume.Templates, tmplDir string, log *slog.Logger) (_ *volume.Staged, err error) {
	st, err := volume.Make(dst, size, uid, tm, tmplDir, log, nil)
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
	err = volume.CopyTree(ctx, ws, mnt)
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
