package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A template sandbox's root.
//
// The root is an overlay mounted by the init inside its own user and mount
// namespaces: the template's layers below (read-only, id-mapped detached
// mounts the server made of the store's layer directories, so every
// sandbox of a template shares their inodes and page cache and none can
// write them), the sandbox's writable layer above (upper and work
// directories in its quota'd workspace image, so what it installs counts
// against limits.disk and no other sandbox sees it). /dev, /proc, /tmp and
// /workspace are what a host-template sandbox has; /etc is the image's,
// with the sandbox's hostname, hosts and resolv.conf bound read-only over
// it. The host's /usr and /etc are not in it.
//
// What the image controls is hostile: every mount point inside the overlay
// is checked to be a real directory (a symlink or a file there is replaced
// in the writable layer before anything is mounted on it), and every name
// is resolved beneath the overlay's root without following symlinks, so a
// layer that makes /proc a link to the init's host view mounts nothing
// outside the sandbox's tree. The overlay is nosuid and nodev; the store
// strips set-id bits and file capabilities and refuses device nodes when it
// unpacks a layer (internal/template/layer).
//
// The staging tmpfs holds the mount points of the layers and of the writable
// directory, and the sources bound into the root (/dev's entries, /proc
// with its masks, the synthetic /etc files); it leaves the tree with the old
// root at pivot_root, kept alive by those binds.

// overlayEtc are the /etc files the sandbox gets from sandhold rather than
// from its image: the image cannot know the sandbox's name, and the only
// resolver is the egress proxy's (see buildEtc).
var overlayEtc = []string{"hostname", "hosts", "resolv.conf"}

// maxRootEntries caps the top-level directories of a template root made
// writable by landlock (OverlayWritable): a hostile image could hold
// thousands, and each is a landlock rule.
const maxRootEntries = 256

func buildOverlay(s Spec) error {
	o := s.Overlay
	if len(o.LayerFDs) == 0 || len(o.LayerFDs) > MaxLayers {
		return fmt.Errorf("an overlay root has 1 to %d layers, not %d", MaxLayers, len(o.LayerFDs))
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	stage := staging
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size=4m"); err != nil {
		return fmt.Errorf("mount staging tmpfs: %w", err)
	}
	root, err := mountOverlay(stage, o)
	if err != nil {
		return err
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open overlay root: %w", err)
	}
	defer closeFD(rootFD)
	for _, d := range []struct {
		name string
		mode uint32
	}{{"dev", 0o755}, {"proc", 0o555}, {"tmp", 0o1777}, {strings.TrimPrefix(Workspace, "/"), 0o755}, {"etc", 0o755}, {"root", 0o700}} {
		if err := ensureDir(rootFD, d.name, d.mode); err != nil {
			return fmt.Errorf("template root /%s: %w", d.name, err)
		}
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		// /dev and /proc are made on the staging tmpfs and bound in: their
		// mount points and masks must not be written into the sandbox's
		// writable layer.
		{"dev", func() error { return bindStaged(stage, root, "dev", s, buildDev, unix.MS_RDONLY|unix.MS_NOSUID) }},
		{"proc", func() error { return bindStaged(stage, root, "proc", s, buildProc, 0) }},
		{"tmp", func() error { return buildTmp(root, s) }},
		{"workspace", func() error { return bindWorkspace(root, s) }},
		{"etc", func() error { return bindOverlayEtc(stage, root, rootFD, s) }},
	}
	for _, st := range steps {
		if err := st.fn(); err != nil {
			return fmt.Errorf("build %s: %w", st.name, err)
		}
	}
	if err := pivot(root); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if err := os.Chdir(Workspace); err != nil {
		return fmt.Errorf("enter workspace: %w", err)
	}
	return nil
}

// mountOverlay attaches the layers and the writable directory below stage
// and mounts the overlay of them at stage/root, which it returns.
func mountOverlay(stage string, o *Overlay) (string, error) {
	lower := make([]string, 0, len(o.LayerFDs))
	if err := mkdirRoot(filepath.Join(stage, "l"), 0o700); err != nil {
		return "", err
	}
	for i, fd := range o.LayerFDs {
		p := filepath.Join(stage, "l", strconv.Itoa(i))
		if err := attach(fd, p); err != nil {
			return "", fmt.Errorf("attach layer %d: %w", i, err)
		}
		lower = append(lower, p)
	}
	// overlayfs lists the uppermost lower layer first.
	slices.Reverse(lower)
	rw := filepath.Join(stage, "rw")
	if err := attach(o.WritableFD, rw); err != nil {
		return "", fmt.Errorf("attach writable layer: %w", err)
	}
	root := filepath.Join(stage, "root")
	if err := mkdirRoot(root, 0o755); err != nil {
		return "", err
	}
	// userxattr: the overlay's own attributes (opaque directories,
	// redirects) are user.overlay.*, which a user namespace's root may
	// write; the store marks opaque directories that way.
	opts := "lowerdir=" + strings.Join(lower, ":") +
		",upperdir=" + filepath.Join(rw, UpperDir) + ",workdir=" + filepath.Join(rw, WorkDir) + ",userxattr"
	if err := unix.Mount("overlay", root, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return "", fmt.Errorf("mount overlay root: %w", err)
	}
	return root, nil
}

// attach moves the detached mount fd to a new directory p.
func attach(fd int, p string) error {
	if err := mkdirRoot(p, 0o700); err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// bindStaged builds stage/name with build (as for a host root, whose
// builders make the directory in the root they are given) and binds it,
// with the mounts below it, on root/name; extra flags, if any, are set on
// the bind itself.
func bindStaged(stage, root, name string, s Spec, build func(string, Spec) error, extra uintptr) error {
	if err := build(stage, s); err != nil {
		return err
	}
	dst := filepath.Join(root, name)
	if err := unix.Mount(filepath.Join(stage, name), dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind /%s: %w", name, err)
	}
	if extra == 0 {
		return nil
	}
	return remount(dst, extra)
}

// bindOverlayEtc binds the synthetic overlayEtc files, written on the
// staging tmpfs, read-only over the image's.
func bindOverlayEtc(stage, root string, rootFD int, s Spec) error {
	src := filepath.Join(stage, "etc")
	if err := mkdirRoot(src, 0o755); err != nil {
		return err
	}
	files := etcFiles(s)
	etcFD, err := openBeneath(rootFD, "etc", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("open /etc: %w", err)
	}
	defer closeFD(etcFD)
	for _, name := range overlayEtc {
		if err := writeRoot(filepath.Join(src, name), []byte(files[name]), 0o644); err != nil {
			return err
		}
		if err := ensureFile(etcFD, name); err != nil {
			return fmt.Errorf("/etc/%s: %w", name, err)
		}
		dst := filepath.Join(root, "etc", name)
		if err := unix.Mount(filepath.Join(src, name), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /etc/%s: %w", name, err)
		}
		if err := remount(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
			return err
		}
	}
	return nil
}

// resolveBeneath resolves a name below a directory descriptor without
// following any symlink and without leaving its mount.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

func openBeneath(dirFD int, name string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: resolveBeneath} //nolint:gosec // G115: open flags are positive
	for {
		fd, err := unix.Openat2(dirFD, name, &how)
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			return fd, err
		}
	}
}

// ensureDir makes name, one component below dirFD, a real directory: a
// symlink, file or anything else the image put there is removed (a
// whiteout in the writable layer) and a directory made in its place.
func ensureDir(dirFD int, name string, mode uint32) error {
	fd, err := openBeneath(dirFD, name, unix.O_PATH|unix.O_DIRECTORY)
	switch {
	case err == nil:
		closeFD(fd)
		return nil
	case errors.Is(err, unix.ENOENT):
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		if err := unix.Unlinkat(dirFD, name, 0); err != nil {
			return fmt.Errorf("replace a non-directory: %w", err)
		}
	default:
		return err
	}
	if err := unix.Mkdirat(dirFD, name, mode); err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	// The mode is exact, whatever the umask.
	return unix.Fchmodat(dirFD, name, mode, 0)
}

// ensureFile makes name, one component below dirFD, a regular file that
// a file can be bound on: a symlink is replaced by an empty file (the
// image's link would lead the bind elsewhere), a missing one is made, a
// directory is an error.
func ensureFile(dirFD int, name string) error {
	fd, err := openBeneath(dirFD, name, unix.O_PATH)
	if err == nil {
		var st unix.Stat_t
		serr := unix.Fstat(fd, &st)
		closeFD(fd)
		if serr != nil {
			return serr
		}
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			return nil
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return errors.New("is a directory in the template")
		}
		err = unix.ELOOP // a device or fifo: replaced like a symlink
	}
	switch {
	case errors.Is(err, unix.ENOENT):
	case errors.Is(err, unix.ELOOP):
		if err := unix.Unlinkat(dirFD, name, 0); err != nil {
			return fmt.Errorf("replace a non-file: %w", err)
		}
	default:
		return err
	}
	nfd, err := unix.Openat(dirFD, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	closeFD(nfd)
	return nil
}

// OverlayWritable lists the trees landlock lets a template sandbox write,
// read after the pivot: every top-level directory of the root (the
// template's userland is the sandbox's to change, in its writable layer)
// but /proc, /dev and /sys, plus /dev/shm and /dev/pts. Symlinks are not
// listed (what they lead to is, if it is writable). A new top-level
// directory cannot be made: that would need write access to / itself,
// which covers /proc and /dev too.
func OverlayWritable() ([]string, error) {
	entries, err := os.ReadDir("/")
	if err != nil {
		return nil, fmt.Errorf("list the root: %w", err)
	}
	out := []string{"/dev/shm", "/dev/pts"}
	for _, e := range entries {
		if len(out) >= maxRootEntries {
			break
		}
		switch e.Name() {
		case "proc", "dev", "sys":
			continue
		}
		if e.Type().IsDir() {
			out = append(out, "/"+e.Name())
		}
	}
	return out, nil
}

// DetachedLayer clones dir, a layer of the template store, as a detached
// mount for a template sandbox's init to stack in its overlay root:
// read-only, nosuid, nodev, and id-mapped through userns (the sandbox's
// user namespace), so that a file the image gives to uid 0 belongs to the
// sandbox's root, an unprivileged host uid, and not to the host's. It runs
// in the server.
func DetachedLayer(dir string, userns int) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return nil, fmt.Errorf("clone layer mount: %w", err)
	}
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns), //nolint:gosec // G115: a descriptor number
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		closeFD(fd)
		return nil, fmt.Errorf("id-map layer mount: %w", err)
	}
	return os.NewFile(uintptr(fd), "layer-mount"), nil
}

// DetachedSubtree clones the directory name directly below the mount mnt
// (a workspace image the server holds mounted) as a detached mount with
// nosuid and nodev set: the workspace and the writable layer of a template
// sandbox, which share one image and so one quota. It runs in the server.
func DetachedSubtree(mnt *os.File, name string) (*os.File, error) {
	fd, err := unix.OpenTree(int(mnt.Fd()), name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW) //nolint:gosec // G115: a descriptor number
	if err != nil {
		return nil, fmt.Errorf("clone %s mount: %w", name, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		closeFD(fd)
		return nil, fmt.Errorf("set %s mount flags: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name+"-mount"), nil
}

func closeFD(fd int) { _ = unix.Close(fd) }
