package volume

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

// Clone clones img into an unnamed file in dir (O_TMPFILE: nothing
// is left behind whatever happens), or fails where the file system cannot
// share blocks.
func Clone(img *os.File, dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	c := os.NewFile(uintptr(fd), "image-clone")
	if err := unix.IoctlFileClone(fd, int(img.Fd())); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// detachWait bounds the wait for a released workspace's loop device to go:
// the kernel tears the mount down once the sandbox's last process is
// reaped, which takes milliseconds.
const detachWait = 10 * time.Second

// WaitDetached waits until no loop device holds img.
func WaitDetached(img string) error {
	deadline := time.Now().Add(detachWait)
	for {
		busy, err := Attached(img)
		if err != nil {
			return err
		}
		if !busy {
			return nil
		}
		if time.Now().After(deadline) {
			return fault.New(fault.Unavailable, "the sandbox's workspace is still being released; try again")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// maxShiftDepth bounds the directories the id shift descends: deeper than
// any tree a path of PATH_MAX can name (4096 / 2).
const maxShiftDepth = 2048

// ShiftIDs gives the files of a restored image, owned under the source
// sandbox's host ids (from), the same ids under this sandbox's (to): every
// inode whose owner or group falls in from's range moves to to's, other
// ids (root's, outside any range) stay. A change of owner clears setuid and
// setgid bits, which are set again; file capabilities (tied to the source's
// user namespace) do not survive, nor do uids inside POSIX ACLs. The walk
// never follows a symlink and stays on the image's file system.
func ShiftIDs(root *os.File, from, to uint32) error {
	if from == to {
		return nil
	}
	shift := func(id uint32) (uint32, bool) {
		if id >= from && id-from < agent.IDRange {
			return to + (id - from), true
		}
		return id, false
	}
	rootFD, err := unix.Openat(int(root.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("shift ids: %w", err)
	}
	one := func(dirfd int, name string) (isDir bool, err error) {
		var st unix.Stat_t
		flags := unix.AT_SYMLINK_NOFOLLOW
		if name == "" {
			flags |= unix.AT_EMPTY_PATH
		}
		if err := unix.Fstatat(dirfd, name, &st, flags); err != nil {
			return false, err
		}
		uid, su := shift(st.Uid)
		gid, sg := shift(st.Gid)
		if su || sg {
			if err := unix.Fchownat(dirfd, name, int(uid), int(gid), flags); err != nil {
				return false, err
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
				if err := unix.Fchmodat(dirfd, name, st.Mode&0o7777, 0); err != nil {
					return false, err
				}
			}
		}
		return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
	}
	defer func() { _ = unix.Close(rootFD) }()
	if _, err := one(rootFD, ""); err != nil {
		return fmt.Errorf("shift ids: %w", err)
	}
	// Directories still to walk, by path below the root (opened one at a
	// time, so the walk holds two descriptors however wide the tree).
	type dir struct {
		path  string
		depth int
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS}
	stack := []dir{{".", 0}}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		fd, err := unix.Openat2(rootFD, d.path, &how)
		if err != nil {
			return fmt.Errorf("shift ids: %w", err)
		}
		f := os.NewFile(uintptr(fd), "dir")
		names, err := f.Readdirnames(-1)
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("shift ids: %w", err)
		}
		for _, n := range names {
			isDir, err := one(fd, n)
			if err != nil {
				_ = f.Close()
				return fmt.Errorf("shift ids: %w", err)
			}
			if !isDir {
				continue
			}
			if d.depth+1 > maxShiftDepth {
				_ = f.Close()
				return fmt.Errorf("shift ids: directories nested deeper than %d", maxShiftDepth)
			}
			stack = append(stack, dir{d.path + "/" + n, d.depth + 1})
		}
		_ = f.Close()
	}
	return nil
}
