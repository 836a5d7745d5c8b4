package sandbox

import (
	"context"
	"os"
	"path/filepath"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/forklower"
	"github.com/sandhold/sandhold/internal/sandbox/snapkeep"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

// capture runs fn on the sandbox's workspace image while the image holds
// still: every process of the sandbox frozen (the cgroup freezer, v1 or
// v2), and the file system flushed to the image (syncfs of the mounted
// workspace: with every writer frozen, what it writes back is the whole
// state). The freeze is undone when fn returns — or, where the file system
// shares blocks, as soon as the image is cloned, fn reading the clone; a
// paused sandbox stays paused.
//
// Why syncfs and not FIFREEZE: a file system freeze waits for the writes
// under way to finish, and a task the cgroup froze inside a write would
// hold it forever; the server's own descriptor is the only other way into
// the file system, and it writes nothing while s.mu is held.
func (s *Sandbox) capture(ctx context.Context, fn func(img *os.File, size int64) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == Hibernated {
		return fault.New(fault.Conflict, "sandbox is hibernated; resume it first")
	}
	if s.diskBytes() <= 0 {
		return fault.New(fault.Unsupported, "a sandbox without a workspace image (no disk quota) cannot be snapshotted")
	}
	var g snapkeep.Freezer // nothing of a stopped or paused sandbox runs
	if s.state == Running && s.group != nil {
		g = s.group
	}
	thaw, err := snapkeep.Hold(g, s.vol, s.m.log, s.rec.ID)
	if err != nil {
		return err
	}
	defer thaw()
	hook := func() { captureHook(s) }
	if layered, err := s.ensureLayeredLocked(ctx); err != nil {
		return err
	} else if layered {
		// A fork's overlay: its merged view, copied whole into an image
		// of its size (forklower_linux.go), is what the snapshot holds.
		flat, err := s.flattenLocked(ctx, filepath.Join(s.workspaceDir(), forklower.FlatImage))
		if err != nil {
			return err
		}
		return snapkeep.ReadFlat(flat, thaw, hook, fn)
	}
	// Where the file system shares blocks, the frozen moment is one clone
	// of the whole image (snapkeep.ReadImage).
	return snapkeep.ReadImage(s.workspaceDir(), thaw, hook, fn)
}

// captureHook sees each capture just before its image is read: a test's
// window into whether the sandbox runs meanwhile.
var captureHook = func(*Sandbox) {}

// imagePath is the sandbox's workspace image.
func (s *Sandbox) imagePath() string { return filepath.Join(s.workspaceDir(), volume.ImageName) }
