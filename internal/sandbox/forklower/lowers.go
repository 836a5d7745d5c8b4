// Package forklower keeps the lower layers of layered forks: a
// snapshot's image restored once per node, its owners shifted to ids
// relative to 0, mounted read-only and shared by the overlays of every
// sandbox made from that snapshot (internal/sandbox mounts the overlays
// and decides which sandboxes are layered).
//
// On a file system without shared blocks (ext4), restoring a snapshot
// wrote a full copy of its image per sandbox (~120 MB for a 100 MB
// workspace): ten forks wrote ten. Instead:
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
// Where the file system shares blocks (XFS with reflinks, btrfs) the
// restore's clone of the image is cheaper and stays. Templated snapshots
// keep the copy: their root's writable layer is an overlay's upper layer
// the init mounts, which cannot itself be stacked on a lower layer without
// the init's help.
package forklower

import (
	"context"
	"os"
	"sync"
	"sync/atomic"

	"github.com/sandhold/sandhold/internal/fault"
)

// The files of the layout.
const (
	// DirName is the lower layers' directory in the data dir.
	DirName = "fork-lowers"
	// Marker names a layered sandbox's snapshot in its workspace dir.
	Marker = "lower.json"
	// UpperImage is a layered sandbox's own image.
	UpperImage = "upper.img"
	// FlatImage is where a layered sandbox's merged view is copied to.
	FlatImage = "flat.img"
)

// ErrGone: neither the node nor the store holds the snapshot.
var ErrGone = fault.New(fault.Unavailable, "the sandbox's snapshot is gone")

// Find finds snapshot snap for its lower layer: restore writes its image
// to a path, fromBase is the host id base its files are owned under. A
// snapshot the store no longer holds is ErrGone.
type Find func(snap string) (restore func(ctx context.Context, dst string) error, fromBase uint32, err error)

// Lowers are the snapshots' lower layers mounted on this node, by
// snapshot id; its zero value is ready.
type Lowers struct {
	mu    sync.Mutex
	bases map[string]*lowerBase

	// probe and clones: whether the workspaces' file system shares blocks
	// (then a restore clones the image and no lower is used).
	probe  sync.Once
	clones bool
	// off: a layered mount failed on this host; forks copy.
	off atomic.Bool
}

// lowerBase is one snapshot's lower layer: its image mounted read-only,
// held while refs sandboxes' overlays are mounted on it.
type lowerBase struct {
	ready chan struct{} // closed once mnt or err is set
	mnt   *os.File
	err   error
	refs  int
}

// Disable layers no more forks in this run: the host cannot mount them.
func (l *Lowers) Disable() { l.off.Store(true) }

// Disabled tells whether Disable was called.
func (l *Lowers) Disabled() bool { return l.off.Load() }
