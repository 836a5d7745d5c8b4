package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/rootfs"
	"github.com/sandhold/sandhold/internal/template/layer"
)

// rootFiles makes the descriptors of a template root for the init pid:
// the writable layer's tree of the workspace image, and each layer of the
// store cloned read-only and id-mapped through the init's user namespace.
// Callers hold s.mu (startLocked) and have the volume mounted.
func (s *Sandbox) rootFiles(pid int, dirs []string) ([]*os.File, error) {
	if s.vol == nil {
		return nil, errors.New("the workspace image is not mounted")
	}
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the init's user namespace: %w", err)
	}
	defer func() { _ = unix.Close(userns) }()
	rw, err := rootfs.DetachedSubtree(s.vol, imageRoot)
	if err != nil {
		return nil, err
	}
	files := []*os.File{rw}
	for _, d := range dirs {
		f, err := rootfs.DetachedLayer(d, userns)
		if err != nil {
			closeFiles(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// templateLayout makes a template sandbox's trees in its workspace image
// (or checks them on a later start): workspace/ for the template's user,
// rootfs/upper and rootfs/work for the namespace's root. The sandbox never
// sees the image's root, only inside these trees.
func templateLayout(vol *os.File, base uint32, uid, gid int) error {
	root := int(vol.Fd()) //nolint:gosec // G115: a descriptor number
	dirs := []struct {
		name       string
		uid, gid   int
		permission uint32
	}{
		{imageWorkspace, int(base) + uid, int(base) + gid, 0o755},
		{imageRoot, int(base), int(base), 0o755},
		{imageRoot + "/" + rootfs.UpperDir, int(base), int(base), 0o755},
		{imageRoot + "/" + rootfs.WorkDir, int(base), int(base), 0o700},
	}
	for _, d := range dirs {
		err := unix.Mkdirat(root, d.name, d.permission)
		made := err == nil
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("make the template layout (%s): %w", d.name, err)
		}
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV}
		fd, err := unix.Openat2(root, d.name, &how)
		if err != nil {
			return fmt.Errorf("check the template layout (%s): %w", d.name, err)
		}
		if made {
			err = unix.Fchownat(fd, "", d.uid, d.gid, unix.AT_EMPTY_PATH)
			if err == nil {
				err = unix.Fchmodat(root, d.name, d.permission, 0)
			}
		}
		_ = unix.Close(fd)
		if err != nil {
			return fmt.Errorf("own the template layout (%s): %w", d.name, err)
		}
	}
	return nil
}

// PackRoot writes the sandbox's writable layer (its overlay's upper
// directory) to w as an OCI layer (layer.Pack): what it changed in its
// template's tree, the mount points its start made left out. A running
// sandbox is frozen while it is read, so the layer is one moment's. It
// starts a stopped sandbox (its image is mounted with its init) and fails
// for a host sandbox, which has no writable root.
func (s *Sandbox) PackRoot(ctx context.Context, w io.Writer, lim layer.Limits) (layer.Stats, error) {
	if s.templateDigest() == "" {
		return layer.Stats{}, fault.New(fault.Invalid, "a host sandbox has no writable root to commit: make it from a template")
	}
	if _, err := s.ensure(ctx); err != nil {
		return layer.Stats{}, err
	}
	s.mu.Lock()
	vol, group, paused := s.vol, s.group, s.state == Paused
	s.mu.Unlock()
	if vol == nil {
		return layer.Stats{}, fault.New(fault.Unavailable, "the sandbox's workspace image is not mounted")
	}
	if group != nil && !paused {
		if err := group.Freeze(); err != nil {
			return layer.Stats{}, fmt.Errorf("freeze the sandbox for its commit: %w", err)
		}
		defer func() { _ = group.Thaw() }()
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV}
	fd, err := unix.Openat2(int(vol.Fd()), imageRoot+"/"+rootfs.UpperDir, &how) //nolint:gosec // G115: a descriptor number
	if err != nil {
		return layer.Stats{}, fmt.Errorf("open the sandbox's writable layer: %w", err)
	}
	upper := os.NewFile(uintptr(fd), "upper") //nolint:gosec // G115: a descriptor number
	defer func() { _ = upper.Close() }()
	return layer.Pack(ctx, w, layer.PackSpec{Upper: upper, IDBase: hostBase(s.rec.Slot), Exclude: []string{imageWorkspace}, Limits: lim})
}
