package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

const (
	// upperDir and workDir are the overlay's directories in a layered
	// sandbox's own image.
	upperDir, workDir = "upper", "work"
	// flattenTimeout bounds the copy of a merged view.
	flattenTimeout = 30 * time.Minute
)

// SharesBlocks clones a block between two unnamed files in dir.
func SharesBlocks(dir string) bool {
	a, err := unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false
	}
	defer closeFD(a)
	if _, err := unix.Pwrite(a, make([]byte, 64<<10), 0); err != nil {
		return false
	}
	b, err := unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false
	}
	defer closeFD(b)
	return unix.IoctlFileClone(b, a) == nil
}

func SyncFS(vol *os.File) error {
	fd, err := unix.Openat(int(vol.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) //nolint:gosec // G115: a descriptor number
	if err != nil {
		return err
	}
	defer closeFD(fd)
	return unix.Syncfs(fd)
}

// MountReadOnly mounts the ext4 image p read-only (a read-only loop
// device, autoclear), detached, nosuid and nodev.
func MountReadOnly(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0) //nolint:gosec // G304: an image in the server's own data dir
	if err != nil {
		return nil, fmt.Errorf("open fork lower: %w", err)
	}
	defer func() { _ = f.Close() }()
	dev, loop, err := attachLoopFlags(f, unix.LO_FLAGS_AUTOCLEAR|unix.LO_FLAGS_READ_ONLY|unix.LO_FLAGS_DIRECT_IO)
	if err != nil {
		return nil, err
	}
	defer func() { _ = loop.Close() }()
	fs, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen ext4: %w", err)
	}
	defer closeFD(fs)
	for _, st := range []func() error{
		func() error { return unix.FsconfigSetString(fs, "source", dev) },
		func() error { return unix.FsconfigSetFlag(fs, "ro") },
		func() error { return unix.FsconfigSetFlag(fs, "no_prefetch_block_bitmaps") },
		func() error { return unix.FsconfigCreate(fs) },
	} {
		if err := st(); err != nil {
			return nil, fmt.Errorf("mount fork lower: %w", err)
		}
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("fsmount fork lower: %w", err)
	}
	return os.NewFile(uintptr(mfd), "fork-lower"), nil
}

// MountForkOverlay mounts, detached, the overlay of a clone of the lower
// mount base (read-only, id-mapped: ids relative to 0 become hostBase's)
// and upper/ and work/ of the sandbox's own file system vol, made on its
// first mount (upper/ with the lower root's owner and mode, the overlay
// root's).
func MountForkOverlay(base, vol *os.File, hostBase uint32) (*os.File, error) {
	ns, err := IDMapUserns(hostBase)
	if err != nil {
		return nil, err
	}
	defer closeFD(ns)
	lower, err := unix.OpenTree(int(base.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH) //nolint:gosec // G115: a descriptor number
	if err != nil {
		return nil, fmt.Errorf("clone fork lower: %w", err)
	}
	defer closeFD(lower)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns)} //nolint:gosec // G115: a descriptor number
	if err := unix.MountSetattr(lower, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return nil, fmt.Errorf("id-map fork lower: %w", err)
	}
	var top unix.Stat_t
	if err := unix.Fstat(lower, &top); err != nil {
		return nil, fmt.Errorf("fork lower: %w", err)
	}
	root := int(vol.Fd()) //nolint:gosec // G115: a descriptor number
	dirs := make([]int, 0, 2)
	defer func() {
		for _, fd := range dirs {
			closeFD(fd)
		}
	}()
	for _, d := range []struct {
		name     string
		uid, gid int
		mode     uint32
	}{{upperDir, int(top.Uid), int(top.Gid), top.Mode & 0o7777}, {workDir, 0, 0, 0o700}} {
		err := unix.Mkdirat(root, d.name, 0o700)
		made := err == nil
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("fork layer %s: %w", d.name, err)
		}
		how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV}
		fd, err := unix.Openat2(root, d.name, &how)
		if err != nil {
			return nil, fmt.Errorf("fork layer %s: %w", d.name, err)
		}
		dirs = append(dirs, fd)
		if made {
			if err := unix.Fchown(fd, d.uid, d.gid); err != nil {
				return nil, fmt.Errorf("fork layer %s: %w", d.name, err)
			}
			if err := unix.Fchmod(fd, d.mode); err != nil {
				return nil, fmt.Errorf("fork layer %s: %w", d.name, err)
			}
		}
	}
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen overlay: %w", err)
	}
	defer closeFD(fs)
	if err := overlayLayers(fs, lower, dirs[0], dirs[1]); err != nil {
		return nil, err
	}
	// index: a hard link of the lower stays one file when one of its
	// names is written (copied up once). redirect_dir: a directory of the
	// lower renames as rename(2) promises (without it, EXDEV). Both keep
	// their records in trusted.overlay.* of the upper, which nothing in
	// the sandbox can write. xino: every file has the overlay's device and
	// an inode number of its own, lower or upper (ext4's inode numbers
	// leave the high bits free for the layer).
	for _, o := range []string{"index", "redirect_dir", "xino"} {
		if err := unix.FsconfigSetString(fs, o, "on"); err != nil {
			return nil, fmt.Errorf("fork overlay %s: %w", o, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, fmt.Errorf("mount fork overlay: %w", err)
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("fsmount fork overlay: %w", err)
	}
	return os.NewFile(uintptr(mfd), "fork-workspace"), nil
}

// overlayLayers gives the overlay its layers by descriptor (Linux 6.13),
// else by their /proc/self/fd paths.
func overlayLayers(fs, lower, upper, work int) error {
	err := unix.FsconfigSetFd(fs, "lowerdir+", lower)
	if err == nil {
		if err = unix.FsconfigSetFd(fs, "upperdir", upper); err == nil {
			err = unix.FsconfigSetFd(fs, "workdir", work)
		}
		if err != nil {
			return fmt.Errorf("fork overlay layers: %w", err)
		}
		return nil
	}
	for _, p := range []struct {
		key string
		fd  int
	}{{"lowerdir", lower}, {"upperdir", upper}, {"workdir", work}} {
		if err := unix.FsconfigSetString(fs, p.key, fmt.Sprintf("/proc/self/fd/%d", p.fd)); err != nil {
			return fmt.Errorf("fork overlay layers (%s): %w", p.key, err)
		}
	}
	return nil
}

// IDMapUserns returns a user namespace mapping ids 0… to hostBase… (the
// sandbox's own map), for an id-mapped mount: a child is cloned into it
// and stopped at its exec (ptrace) before it runs anything, the
// namespace opened, the child killed.
func IDMapUserns(hostBase uint32) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/proc/self/exe") //nolint:gosec // G204: never runs: stopped at its exec and killed
	cmd.Args = []string{"sandhold-idmap"}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(hostBase), Size: agent.IDRange}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(hostBase), Size: agent.IDRange}},
		Ptrace:      true,
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("id-map user namespace: %w", err)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		return -1, fmt.Errorf("id-map user namespace: %w", err)
	}
	return fd, nil
}

// CopyTree copies the tree of mount src into mount dst with cp -a (owners,
// modes, times, hard links, symlinks as links, extended attributes, holes).
// src is the sandbox's, read while it holds still; cp never follows a
// symlink of it.
func CopyTree(ctx context.Context, src, dst *os.File) error {
	cp, err := Tool("cp")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flattenTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cp, "-a", "--sparse=always", "/proc/self/fd/3/.", "/proc/self/fd/4/") //nolint:gosec // G204: coreutils' cp from a fixed directory list, fixed arguments
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	cmd.ExtraFiles = []*os.File{src, dst}
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "No space left on device") {
		return fault.New(fault.Conflict, "the fork's snapshot's files and its own writes do not fit in one image of its disk limit (limits.disk); delete files first")
	}
	if err != nil {
		return fmt.Errorf("cp: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
