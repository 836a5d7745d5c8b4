package volume

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Caps and names of the volume with their reasons.
const (
	// ImageName is the image inside the sandbox's workspace directory.
	ImageName = "disk.img"
	// MinBytes: ext4 needs some room for its metadata; smaller
	// quotas are raised to this.
	MinBytes = 16 << 20
	// mkfsTimeout bounds mkfs.ext4 and e2fsck on one image.
	mkfsTimeout = 60 * time.Second
	// maxLoopScan bounds the loop devices looked at when reaping: far more
	// than one host's sandboxes.
	maxLoopScan = 1 << 16
)

// toolDirs are where Debian keeps e2fsprogs; the server's own PATH is not
// consulted (and its environment never reaches the tools).
var toolDirs = [...]string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"}

func Tool(name string) (string, error) {
	for _, d := range toolDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (install e2fsprogs)", name)
}

func Run(ctx context.Context, name string, args ...string) error {
	p, err := Tool(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, mkfsTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, args...) //nolint:gosec // G204: e2fsprogs from a fixed directory list, on the server's own image
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}

// Open makes the image if it does not exist (a copy of the size's
// template from tm, kept in tmplDir; formatted with mkfs.ext4 when tm is nil
// or has no template for it) and mounts it detached.
//
// A new image is mounted as soon as it is written, under its temporary name
// and through a buffered loop device, and finish (non-nil only then) does
// the rest: fsync the image, rename it into place, fsync the directory,
// and switch the loop device to direct I/O. Until finish returns, a crash
// leaves no image under its name (Staged), and a caller must not
// report the workspace as made. Mounting first lets the fsync run beside
// the init's start; a buffered loop device reads the new file system's
// metadata from the page cache the copy just filled, where direct I/O would
// write back and read every block again from the disk (the mount and the
// first writes took 5–10 ms longer that way).
func Open(img string, size int64, uid int, tm *Templates, tmplDir string, log *slog.Logger, clk Clock) (mnt *os.File, finish func() error, err error) {
	var staged *Staged
	_, err = os.Lstat(img)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if staged, err = Make(img, size, uid, tm, tmplDir, log, clk); err != nil {
			return nil, nil, err
		}
		defer func() {
			if err != nil {
				staged.Abort()
			}
		}()
	case err == nil:
		busy, err := Attached(img)
		if err != nil {
			return nil, nil, err
		}
		if busy {
			// A previous run's mount is still being torn down; mounting
			// the image a second time would corrupt it.
			return nil, nil, fmt.Errorf("workspace image still attached to a loop device")
		}
		if clean, err := imageClean(img); err != nil {
			return nil, nil, err
		} else if !clean {
			if err := Run(context.Background(), "e2fsck", "-p", img); err != nil {
				// Exit status 1 means "errors corrected".
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					return nil, nil, fmt.Errorf("check workspace image: %w", err)
				}
			}
		}
	default:
		return nil, nil, fmt.Errorf("open workspace image: %w", err)
	}
	if staged == nil {
		mnt, _, err = Mount(img, true, clk)
		return mnt, nil, err
	}
	mnt, loop, err := Mount(staged.tmp, false, clk)
	if err != nil {
		return nil, nil, err
	}
	{
		// mkfs makes lost+found; the sandbox's /workspace starts empty.
		// (Templates have none: this is for images formatted per
		// sandbox, where it costs a removal and a discard.)
		_ = unix.Unlinkat(int(mnt.Fd()), "lost+found", unix.AT_REMOVEDIR)
		mark(clk, "workspace_rmdir")
		// A template's root belongs to root; the copy is the sandbox's.
		if err := unix.Fchownat(int(mnt.Fd()), "", uid, uid, unix.AT_EMPTY_PATH); err != nil {
			_ = mnt.Close()
			_ = loop.Close()
			return nil, nil, fmt.Errorf("own workspace: %w", err)
		}
		mark(clk, "workspace_own")
	}
	finish = func() error {
		defer func() { _ = loop.Close() }()
		if err := staged.Commit(); err != nil {
			staged.Abort()
			return err
		}
		// The image is on disk and its pages clean: from now on the
		// file system's I/O bypasses the host's page cache (see
		// attachLoop). A host file system that cannot do direct I/O
		// keeps the buffered device; nothing depends on it.
		if err := unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_SET_DIRECT_IO, 1); err != nil && log != nil {
			log.Debug("workspace loop device stays buffered", "err", err)
		}
		return nil
	}
	return mnt, finish, nil
}

// Make writes a new image for img: a copy of the template, else a
// fresh mkfs.ext4, complete under its temporary name; committing it makes
// it durable under img.
func Make(img string, size int64, uid int, tm *Templates, tmplDir string, log *slog.Logger, clk Clock) (*Staged, error) {
	if tm != nil {
		st, err := tm.stage(tmplDir, img, size, clk)
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, ErrNoTemplate) && !errors.Is(err, ErrTemplateBusy) && log != nil {
			log.Warn("workspace template unusable; formatting the image instead", "err", err)
		}
	}
	st, err := StageCopy(img, size, true, func(f *os.File) error {
		return Run(context.Background(), "mkfs.ext4", mkfsArgs(f.Name(), uid, false)...)
	})
	if err != nil {
		return nil, fmt.Errorf("format workspace image: %w", err)
	}
	mark(clk, "image_copy")
	return st, nil
}

// imageClean reads the ext4 superblock's state: bit 0 of s_state (at byte
// 1024+58) is set when the file system was unmounted cleanly.
func imageClean(img string) (bool, error) {
	f, err := os.Open(img) //nolint:gosec // G304: the image in the server's own data dir
	if err != nil {
		return false, fmt.Errorf("open workspace image: %w", err)
	}
	defer func() { _ = f.Close() }()
	var b [2]byte
	if _, err := f.ReadAt(b[:], 1024+58); err != nil {
		return false, fmt.Errorf("read workspace image superblock: %w", err)
	}
	return binary.LittleEndian.Uint16(b[:])&1 == 1, nil
}

// Mount attaches img to a free loop device (autoclear; direct I/O or
// buffered) and mounts it detached, nosuid and nodev. With direct it closes
// the loop device's descriptor; otherwise it returns it, for the caller to
// switch the device to direct I/O later and close it.
func Mount(img string, direct bool, clk Clock) (mnt, loopDev *os.File, err error) {
	f, err := os.OpenFile(img, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0) //nolint:gosec // G304: the image in the server's own data dir
	if err != nil {
		return nil, nil, fmt.Errorf("open workspace image: %w", err)
	}
	defer func() { _ = f.Close() }()
	dev, loop, err := attachLoop(f, direct)
	if err != nil {
		return nil, nil, err
	}
	// The loop descriptor is closed once the file system holds the device
	// (and, when buffered, the caller is done with it); autoclear then
	// detaches it when the file system goes.
	defer func() {
		if direct || err != nil {
			_ = loop.Close()
		} else {
			loopDev = loop
		}
	}()
	mark(clk, "loop_attach")
	fs, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("fsopen ext4: %w", err)
	}
	defer closeFD(fs)
	steps := []struct {
		what string
		err  func() error
	}{
		{"source", func() error { return unix.FsconfigSetString(fs, "source", dev) }},
		// The sparse image's inode tables read as zero already.
		{"noinit_itable", func() error { return unix.FsconfigSetFlag(fs, "noinit_itable") }},
		// No read of every block group's bitmap after the mount: ext4
		// would otherwise prefetch them all (38 for 5 GB) and keep them
		// cached for the mount's life, ≈150 KB per idle sandbox. A
		// group's bitmap is read when something is first allocated in it.
		{"no_prefetch_block_bitmaps", func() error { return unix.FsconfigSetFlag(fs, "no_prefetch_block_bitmaps") }},
		// Freed blocks are punched out of the image.
		{"discard", func() error { return unix.FsconfigSetFlag(fs, "discard") }},
		// Errors make the file system read-only rather than panic the host.
		{"errors", func() error { return unix.FsconfigSetString(fs, "errors", "remount-ro") }},
		{"create", func() error { return unix.FsconfigCreate(fs) }},
	}
	for _, st := range steps {
		if err := st.err(); err != nil {
			return nil, nil, fmt.Errorf("mount workspace (%s): %w", st.what, err)
		}
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, nil, fmt.Errorf("fsmount workspace: %w", err)
	}
	mark(clk, "mount")
	return os.NewFile(uintptr(mfd), "workspace-volume"), nil, nil
}

// attachLoop binds f to a free loop device in one LOOP_CONFIGURE (no window
// in which the device is bound without autoclear).
func attachLoop(f *os.File, direct bool) (string, *os.File, error) {
	flags := uint32(unix.LO_FLAGS_AUTOCLEAR)
	if direct {
		flags |= unix.LO_FLAGS_DIRECT_IO
	}
	return attachLoopFlags(f, flags)
}

// attachLoopFlags is attachLoop with the device's flags (autoclear, direct
// I/O, read-only) given.
func attachLoopFlags(f *os.File, flags uint32) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open loop control: %w", err)
	}
	defer func() { _ = ctl.Close() }()
	// Another process may take the free device between GET_FREE and
	// CONFIGURE (EBUSY). GET_FREE names the lowest free device to every
	// caller at once, so each round settles at least one of the racers:
	// the tries must outnumber the starts at once (creates beside the warm
	// pool's refill; 12 creates at once on a 2-CPU host ran out of 8 tries
	// and answered 500).
	const maxLoopTries = 64
	var lastErr error
	for range maxLoopTries {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		lf, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0) //nolint:gosec // G304: /dev/loopN named by LOOP_CTL_GET_FREE
		if err != nil {
			lastErr = err
			continue
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())} //nolint:gosec // G115: a descriptor number fits 32 bits
		// Direct I/O: the image's pages are cached once (by the
		// workspace file system), not a second time as the backing
		// file's; the kernel falls back to buffered I/O where the host
		// file system cannot.
		cfg.Info.Flags = flags
		// The device's blocks are no larger than the file system's: left
		// to itself, direct I/O on a file whose blocks are shared (an
		// image cloned on XFS, as a restore or a template copy makes it)
		// takes the 4 KiB alignment the host asks for, and ext4 with 1 KiB
		// blocks (mkfs's choice below 512 MB) refuses to mount ("bad
		// block size 1024"). Where the host cannot do direct I/O in the
		// image's blocks the kernel keeps the device buffered.
		cfg.Size = imageBlockSize(f) // struct loop_config.block_size
		copy(cfg.Info.File_name[:], "sandhold-workspace")
		if err := unix.IoctlLoopConfigure(int(lf.Fd()), &cfg); err != nil {
			_ = lf.Close()
			lastErr = err
			if errors.Is(err, unix.EBUSY) {
				continue
			}
			return "", nil, fmt.Errorf("configure %s: %w", dev, err)
		}
		return dev, lf, nil
	}
	return "", nil, fmt.Errorf("attach workspace image to a loop device: %w", lastErr)
}

// imageBlockSize is the block size of the ext4 file system in f, or 0
// (the kernel's choice) when f holds none it can read.
func imageBlockSize(f *os.File) uint32 {
	var b [superSize]byte
	if _, err := f.ReadAt(b[:], superOff); err != nil {
		return 0
	}
	le := binary.LittleEndian
	if le.Uint16(b[sbMagic:]) != ext4Magic {
		return 0
	}
	if lb := le.Uint32(b[sbLogBlockSize:]); lb <= 2 { // 1, 2 or 4 KiB: what a loop device takes
		return 1024 << lb
	}
	return 0
}

// Usage is statfs of a mounted workspace file system (mnt, the server's
// detached mount): the bytes in use and its size, what the quota counts
// (not the image file's size).
func Usage(mnt *os.File) (used, total int64, err error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(mnt.Fd()), &st); err != nil {
		return 0, 0, err
	}
	// Bsize is an int64 on linux; the block counts are uint64 of one image.
	u, t := int64(st.Blocks-st.Bfree), int64(st.Blocks) // #nosec G115 -- block counts of one image, far below 2^63
	return u * st.Bsize, t * st.Bsize, nil
}

// DetachLeft handles loop devices a previous run of the server left bound
// to images below root (it can only happen while that run's last users
// are being torn down, since every device is autoclear): each is asked to
// detach (LOOP_CLR_FD; on a busy device the kernel detaches it when the
// last user goes), and DetachLeft waits briefly for them to go. found
// says whether there were any; left is how many are still bound.
func DetachLeft(root string) (found bool, left int) {
	bound, err := LoopBackings(root)
	if err != nil || len(bound) == 0 {
		return false, 0
	}
	for dev := range bound {
		if f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0); err == nil { //nolint:gosec // G304: a /dev/loopN found in /sys/block
			_ = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
			_ = f.Close()
		}
	}
	// Teardown of a dead run's mounts is asynchronous; 2 s is plenty for
	// the kernel and bounded for the server's start.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if bound, err = LoopBackings(root); err != nil || len(bound) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true, len(bound)
}

// ReapLeft detaches the loop devices a previous run of the server left
// bound to its images below root (DetachLeft) and says so in log.
func ReapLeft(root string, log *slog.Logger) {
	found, left := DetachLeft(root)
	switch {
	case !found:
	case left > 0:
		log.Warn("workspace images still attached from a previous run; those sandboxes will not start until they detach", "count", left)
	default:
		log.Info("detached workspace images left by a previous run")
	}
}

// LoopBackings lists the loop devices whose backing file lies below root.
func LoopBackings(root string) (map[string]string, error) {
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	out := make(map[string]string)
	for i, e := range entries {
		if i >= maxLoopScan {
			break
		}
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "loop", "backing_file"))
		if err != nil {
			continue // not bound
		}
		p := strings.TrimSuffix(string(b), "\n")
		if strings.HasPrefix(p, root+string(filepath.Separator)) {
			out["/dev/"+e.Name()] = p
		}
	}
	return out, nil
}

func Attached(img string) (bool, error) {
	m, err := LoopBackings(filepath.Dir(img))
	if err != nil {
		return false, err
	}
	for _, p := range m {
		if p == img || p == img+" (deleted)" {
			return true, nil
		}
	}
	return false, nil
}

// closeFD closes a descriptor used for one operation; see agent's closeFD.
func closeFD(fd int) { _ = unix.Close(fd) }
