package snapkeep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandhold/sandhold/internal/sandbox/diskbudget"
	"github.com/sandhold/sandhold/internal/sandbox/forklower"
	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/snapshot"
)

// The lower layers of layered forks: a fork of a snapshot on a file
// system without shared blocks gets the snapshot's lower layer
// (internal/sandbox/forklower, which says the layout), shared by every
// sandbox made from that snapshot on this node; the keep holds them with
// their reference counts, mounts a sandbox's overlay on one and collects
// the images nothing needs. The sandbox decides which sandboxes are
// layered and when their layers are mounted (its forklower_linux.go).

// MountLayers mounts a layered workspace in dir: snapshot snap's lower
// (restored first if this node has none), the sandbox's own image
// (forklower.UpperImage, opened by open as volume.Open does: made if new,
// its finish, if any, returned) and the overlay of them, id-mapped to the
// host id base base. On an error nothing of it stays mounted.
func (k *Keep) MountLayers(ctx context.Context, dir, snap string, base uint32, open func(img string) (*os.File, func() error, error), clk *startsteps.Clock) (mnt *os.File, l *Layers, finish func() error, err error) {
	lower, err := k.AcquireLower(ctx, snap)
	if err != nil {
		return nil, nil, nil, err
	}
	clk.Mark("fork_lower")
	mnt, finish, err = open(filepath.Join(dir, forklower.UpperImage))
	if err != nil {
		k.ReleaseLower(snap)
		return nil, nil, nil, err
	}
	ws, err := k.cfg.Overlay(lower, mnt, base)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrNoOverlay, err)
		if finish != nil {
			_ = finish()
		}
		_ = mnt.Close()
		k.ReleaseLower(snap)
		return nil, nil, nil, err
	}
	clk.Mark("fork_overlay")
	return mnt, &Layers{Snapshot: snap, WS: ws}, finish, nil
}

// LowersDir is the lower layers' directory.
func (k *Keep) LowersDir() string { return filepath.Join(k.cfg.DataDir, forklower.DirName) }

// Layerable tells whether a fork made in dir's file system may be layered:
// the file system cannot share blocks (then a restore's clone is cheaper)
// and no layered mount failed on this host in this run (DisableLayers).
func (k *Keep) Layerable(dir string) bool {
	return !k.lowers.Clones(dir) && !k.lowers.Disabled()
}

// SetClones fixes what the probe of Layerable finds (a benchmark's view of
// the other file system).
func (k *Keep) SetClones(v bool) { k.lowers.SetClones(v) }

// DisableLayers layers no more forks in this run: the host cannot mount
// them.
func (k *Keep) DisableLayers() { k.lowers.Disable() }

// AcquireLower returns snapshot snap's lower layer mounted read-only
// (restored first if this node has none), one use more of it.
func (k *Keep) AcquireLower(ctx context.Context, snap string) (*os.File, error) {
	return k.lowers.Acquire(ctx, k.LowersDir(), snap, k.findLower)
}

// ReleaseLower drops one use of snap's lower (forklower.Lowers.Release).
func (k *Keep) ReleaseLower(snap string) (last bool) { return k.lowers.Release(snap) }

// DropLayers closes a layered sandbox's overlay and releases its lower;
// the last use of a lower collects the images no snapshot and no sandbox
// needs. Callers hold no sandbox's lock (CollectLowers lists them).
func (k *Keep) DropLayers(l *Layers) {
	if l == nil {
		return
	}
	_ = l.WS.Close()
	if k.ReleaseLower(l.Snapshot) {
		k.CollectLowers()
	}
}

// CollectLowers removes the lower images that no mounted overlay uses, no
// snapshot in the store keeps and no listed sandbox's marker names.
func (k *Keep) CollectLowers() {
	st := k.cfg.Store
	k.lowers.Collect(k.LowersDir(), func() map[string]bool {
		named := make(map[string]bool)
		for _, dir := range k.cfg.Workspaces() {
			if snap, err := forklower.ReadMarker(dir); err == nil {
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
	}, k.cfg.Log)
}

// LowerBytes is what snap's lower file system holds.
func (k *Keep) LowerBytes(snap string) int64 { return k.lowers.Bytes(snap) }

// LowerUsage is what the lower images hold on the disk.
func (k *Keep) LowerUsage() int64 { return diskbudget.EntriesBytes(k.LowersDir()) }

// findLower finds snapshot snap for its lower layer (forklower.Find).
func (k *Keep) findLower(snap string) (func(context.Context, string) error, uint32, error) {
	st, err := k.Store()
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
	h, err := HeadOf(man)
	if err != nil {
		return nil, 0, err
	}
	return func(ctx context.Context, dst string) error { return st.Restore(ctx, man, dst) }, h.HostBase, nil
}
