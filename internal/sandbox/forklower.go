package sandbox

import (
	"os"
	"sync"
	"sync/atomic"
)

// A fork's storage where the file system cannot share blocks
// (forklower_linux.go): rather than a full copy of its snapshot's image,
// a sandbox made from a snapshot gets the snapshot's file system as a
// read-only lower layer, shared by every sandbox made from that snapshot
// on this node, and an overlay on it whose upper layer is an image of its
// own (the quota). Where the file system shares blocks (XFS with
// reflinks, btrfs) the restore's clone of the image is cheaper and stays.

// A layered sandbox's image files in its workspace dir.
const (
	// upperImage is a layered sandbox's own image.
	upperImage = "upper.img"
	// flatImage is where a layered sandbox's merged view is copied to.
	flatImage = "flat.img"
)

// forkLowers are the snapshots' lower layers mounted on this node, by
// snapshot id; its zero value is ready.
type forkLowers struct {
	mu    sync.Mutex
	bases map[string]*lowerBase

	// probe and clones: whether the workspaces' file system shares blocks
	// (then a restore clones the image and no lower is used).
	probe  sync.Once
	clones bool
	// off: a layered mount failed on this host; forks copy (unlayerFresh).
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

// forkMount is a layered sandbox's workspace: the overlay of its
// snapshot's lower layer and the upper layer in its own image (Sandbox.vol).
type forkMount struct {
	snapshot string
	ws       *os.File
}
