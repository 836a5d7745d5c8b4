package templateroot

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/rootfs"
)

// Files makes the descriptors of a template root for the init pid from
// the workspace image mounted at vol: the writable layer's tree, and each
// layer (dirs, the store's) cloned read-only and id-mapped through the
// init's user namespace.
func Files(vol *os.File, pid int, dirs []string) ([]*os.File, error) {
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the init's user namespace: %w", err)
	}
	defer func() { _ = unix.Close(userns) }()
	rw, err := rootfs.DetachedSubtree(vol, Root)
	if err != nil {
		return nil, err
	}
	files := []*os.File{rw}
	for _, d := range dirs {
		f, err := rootfs.DetachedLayer(d, userns)
		if err != nil {
			for _, f := range files {
				_ = f.Close()
			}
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// Layout makes a template sandbox's trees in its workspace image mounted
// at vol (or checks them on a later start): workspace/ for the template's
// user (uid, gid above the sandbox's host id base), rootfs/upper and
// rootfs/work for the namespace's root. The sandbox never sees the image's
// root, only inside these trees.
func Layout(vol *os.File, base uint32, uid, gid int) error {
	root := int(vol.Fd()) //nolint:gosec // G115: a descriptor number
	dirs := []struct {
		name       string
		uid, gid   int
		permission uint32
	}{
		{Workspace, int(base) + uid, int(base) + gid, 0o755},
		{Root, int(base), int(base), 0o755},
		{Root + "/" + rootfs.UpperDir, int(base), int(base), 0o755},
		{Root + "/" + rootfs.WorkDir, int(base), int(base), 0o700},
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

// OpenUpper opens the writable layer (the overlay's upper directory) of
// the workspace image mounted at vol, for reading.
func OpenUpper(vol *os.File) (*os.File, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV}
	fd, err := unix.Openat2(int(vol.Fd()), Root+"/"+rootfs.UpperDir, &how) //nolint:gosec // G115: a descriptor number
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's writable layer: %w", err)
	}
	return os.NewFile(uintptr(fd), "upper"), nil //nolint:gosec // G115: a descriptor number
}
