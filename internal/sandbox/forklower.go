package sandbox

import "github.com/sandhold/sandhold/internal/sandbox/snapkeep"

// A fork's storage where the file system cannot share blocks
// (forklower_linux.go, internal/sandbox/forklower): rather than a full copy
// of its snapshot's image, a sandbox made from a snapshot gets the
// snapshot's file system as a read-only lower layer, shared by every
// sandbox made from that snapshot on this node (snapkeep.Keep), and an
// overlay on it whose upper layer is an image of its own (the quota).
// Where the file system shares blocks (XFS with reflinks, btrfs) the
// restore's clone of the image is cheaper and stays.

// forkMount is a layered sandbox's workspace: the overlay of its
// snapshot's lower layer and the upper layer in its own image (Sandbox.vol).
type forkMount = snapkeep.Layers
