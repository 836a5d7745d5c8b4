package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/rootfs"
	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

// The workspace quota (SANDBOX_MAX_DISK, a sandbox's limits.disk) is
// enforced by the kernel: every sandbox's /workspace is its own ext4 file
// system, made and mounted by package volume (see its documentation).

// workspaceVolume returns a clone of the sandbox's workspace mount for an
// init to attach, creating and mounting the image on first use in this
// server run. A new image comes with durable: the step that makes it
// durable under its name, which the caller runs (beside the init's start)
// and waits for before the sandbox is used (see volume.Open). Callers hold
// s.mu.
//
// A template sandbox's image holds its workspace and its writable layer
// side by side (templateroot.Layout): the init gets a clone of the workspace's
// tree only, and the writable layer's at its start (rootFiles).
func (s *Sandbox) workspaceVolume(dir string, uid int, root *templateroot.Plan, clk *startsteps.Clock) (ws *os.File, durable func() error, err error) {
	if s.vol == nil {
		size := max(s.diskBytes(), volume.MinBytes)
		img := filepath.Join(dir, volume.ImageName)
		snap, layered, err := s.forkLayer(dir, root)
		if err != nil {
			return nil, nil, err
		}
		if layered {
			// A fork's overlay on its snapshot's lower (forklower_linux.go).
			durable, err = s.mountLayered(context.Background(), dir, snap, size, uid, clk)
			if err != nil && s.rec.Restore != nil && s.rec.Restore.Snapshot == snap && errors.Is(err, errNoForkOverlay) {
				// Its first mount, on a host that cannot mount the
				// overlay: a copy of the image will do.
				if uerr := s.unlayerFresh(dir, err); uerr != nil {
					return nil, nil, uerr
				}
				layered = false
			} else if err != nil {
				return nil, nil, err
			}
		}
		if !layered {
			if durable, err = s.imageVolume(img, size, uid, clk); err != nil {
				return nil, nil, err
			}
		}
	}
	fail := func(err error) (*os.File, func() error, error) {
		if durable != nil {
			_ = durable() // never left half done
		}
		return nil, nil, err
	}
	if root != nil {
		base := hostBase(s.rec.Slot)
		if err := templateroot.Layout(s.vol, base, root.UID, root.GID); err != nil {
			return fail(err)
		}
		w, err := rootfs.DetachedSubtree(s.vol, templateroot.Workspace)
		if err != nil {
			return fail(err)
		}
		return w, durable, nil
	}
	src := s.vol
	if s.lower != nil {
		src = s.lower.WS
	}
	fd, err := unix.OpenTree(int(src.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fail(fmt.Errorf("clone workspace mount: %w", err))
	}
	return os.NewFile(uintptr(fd), "workspace-mount"), durable, nil
}

// imageVolume mounts the sandbox's own image, made (or restored from its
// snapshot) if new; see workspaceVolume. Callers hold s.mu.
func (s *Sandbox) imageVolume(img string, size int64, uid int, clk *startsteps.Clock) (durable func() error, err error) {
	if s.rec.Restore != nil {
		// Made from a snapshot, or hibernated (snapshot.go).
		if err := s.restoreImage(context.Background(), img); err != nil {
			return nil, err
		}
	}
	mnt, finish, err := volume.Open(img, size, uid, &s.m.wst, s.m.templateDir(), s.m.log, clk)
	if err != nil {
		return nil, err
	}
	s.vol, durable = mnt, finish
	if r := s.rec.Restore; r != nil {
		if err := volume.ShiftIDs(s.vol, r.FromBase, hostBase(s.rec.Slot)); err != nil {
			_ = s.vol.Close()
			s.vol = nil
			return nil, err
		}
		if !r.Hibernated {
			s.rec.Restore = nil // a hibernation's goes once recorded (startIfStopped)
		}
	}
	return durable, nil
}

// templateDir holds the pre-formatted workspace images (volume.Templates).
func (m *Manager) templateDir() string { return filepath.Join(m.cfg.DataDir, volume.TemplateDirName) }

// diskBytes is the sandbox's quota: its limit, else the server default.
func (s *Sandbox) diskBytes() int64 {
	if d := s.rec.Spec.Limits.DiskBytes; d > 0 {
		return d
	}
	return s.m.cfg.Default.DiskBytes
}

// diskUsage is statfs of the workspace file system the server holds
// mounted (detached): what the quota counts, not the image file's size.
func (s *Sandbox) diskUsage() DiskUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vol == nil {
		return DiskUsage{}
	}
	used, total, err := volume.Usage(s.vol)
	if err != nil {
		return DiskUsage{}
	}
	return DiskUsage{UsedBytes: used, TotalBytes: total}
}

// releaseVolume drops the server's hold on the workspace file system; it
// goes away (and its loop device with it) once no init uses it.
func (s *Sandbox) releaseVolume() {
	s.mu.Lock()
	vol, lower := s.vol, s.lower
	s.vol, s.lower, s.clamp = nil, nil, nil // the clamp goes with the file system
	s.mu.Unlock()
	s.m.snaps.DropLayers(lower)
	if vol != nil {
		_ = vol.Close()
	}
}

// closeVolumeLocked drops the workspace file system of a start that failed
// (a fork's overlay and lower with it). Callers hold s.mu.
func (s *Sandbox) closeVolumeLocked() {
	if s.lower != nil {
		_ = s.lower.WS.Close()
		s.m.snaps.ReleaseLower(s.lower.Snapshot) // its image is collected later
		s.lower = nil
	}
	if s.vol != nil {
		_ = s.vol.Close()
		s.vol = nil
	}
}
