package sandboxinit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"
)

// Caps on file requests.
const (
	// MaxDirEntries is the largest readdir page.
	MaxDirEntries = 4096
	// maxRemoveEntries bounds a recursive remove, so one request cannot
	// keep the init busy without end; the caller repeats for more.
	maxRemoveEntries = 100_000
)

// openFlagsAllowed are the open(2) flags a request may ask for; the init
// adds O_CLOEXEC and O_NOCTTY itself.
const openFlagsAllowed = unix.O_RDONLY | unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_EXCL |
	unix.O_TRUNC | unix.O_APPEND | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_TMPFILE | unix.O_PATH

func (s *server) file(op proto.Op, r *proto.FileReq) (resp proto.Response, out []*os.File, err error) {
	if err := proto.CheckPath(r.Path); err != nil {
		return proto.Response{}, nil, err
	}
	if op == proto.OpRename {
		if err := proto.CheckPath(r.Path2); err != nil {
			return proto.Response{}, nil, err
		}
	}
	if op == proto.OpSymlink {
		if err := proto.CheckPath(r.Path2); err != nil {
			return proto.Response{}, nil, err
		}
		if r.Path == "" || strings.IndexByte(r.Path, 0) >= 0 {
			return proto.Response{}, nil, proto.Invalidf("bad symlink target")
		}
	}
	if r.AsRoot && !s.setup.AllowRoot {
		return proto.Response{}, nil, &proto.Error{Code: "EPERM", Msg: "root file access is not enabled for this sandbox"}
	}
	err = s.asUser(r.AsRoot, func() error {
		var ferr error
		resp, out, ferr = fileOp(op, r)
		return ferr
	})
	return resp, out, err
}

// asUser runs fn on a locked thread whose filesystem uid and gid are the
// sandbox user's, so permission checks are exactly that user's (the kernel
// clears the filesystem capabilities when fsuid leaves 0).
func (s *server) asUser(root bool, fn func() error) error {
	if root {
		return fn()
	}
	runtime.LockOSThread()
	_ = unix.Setfsgid(s.setup.GID)
	_ = unix.Setfsuid(s.setup.UID)
	err := fn()
	_ = unix.Setfsuid(0)
	_ = unix.Setfsgid(0)
	// Only a thread known to be back to fsuid 0 returns to the pool;
	// otherwise it ends with this goroutine (the runtime destroys a
	// thread whose goroutine exits locked).
	if currentFS(unix.SYS_SETFSUID) == 0 && currentFS(unix.SYS_SETFSGID) == 0 {
		runtime.UnlockOSThread()
	}
	return err
}

// currentFS reads the thread's filesystem uid or gid: setfsuid/setfsgid
// return the previous value, and asking for -1 changes nothing.
func currentFS(nr uintptr) int {
	prev, _, _ := unix.RawSyscall(nr, ^uintptr(0), 0, 0)
	return int(int32(prev)) //nolint:gosec // G115: the kernel returns a 32-bit id in the register
}

func resolve(nofollow bool) uint64 {
	// Magic links (/proc/*/fd, /proc/*/root …) could hand out descriptors
	// the init holds; they are never followed.
	res := uint64(unix.RESOLVE_NO_MAGICLINKS)
	if nofollow {
		res |= unix.RESOLVE_NO_SYMLINKS
	}
	return res
}

func openat2(path string, flags int, mode uint32, nofollow bool) (int, error) {
	flags |= unix.O_CLOEXEC
	if flags&unix.O_PATH == 0 {
		flags |= unix.O_NOCTTY // openat2 refuses it next to O_PATH
	}
	how := unix.OpenHow{
		Flags:   uint64(flags), //nolint:gosec // G115: open flags are non-negative bit sets
		Mode:    uint64(mode & 0o7777),
		Resolve: resolve(nofollow),
	}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue // a rename raced the lookup; the kernel asks us to retry
		}
		return fd, err
	}
}

// openParent opens the directory holding path and returns it with the
// last component.
func openParent(path string, nofollow bool) (int, string, error) {
	dir, base := filepath.Split(path)
	if base == "" {
		return -1, "", proto.Invalidf("path names the root")
	}
	fd, err := openat2(filepath.Clean(dir), unix.O_PATH|unix.O_DIRECTORY, 0, nofollow)
	return fd, base, err
}

func fileOp(op proto.Op, r *proto.FileReq) (proto.Response, []*os.File, error) {
	switch op {
	case proto.OpOpen:
		if r.Flags&^openFlagsAllowed != 0 {
			return proto.Response{}, nil, proto.Invalidf("open flags %#x not allowed", r.Flags&^openFlagsAllowed)
		}
		fd, err := openat2(r.Path, r.Flags, r.Mode, r.NoFollow)
		if err != nil {
			return proto.Response{}, nil, err
		}
		f := os.NewFile(uintptr(fd), r.Path)
		st, err := statFD(fd, filepath.Base(r.Path))
		if err != nil {
			_ = f.Close()
			return proto.Response{}, nil, err
		}
		return proto.Response{File: &proto.FileResp{Stat: &st}}, []*os.File{f}, nil
	case proto.OpStat, proto.OpLstat:
		flags := unix.O_PATH
		if op == proto.OpLstat {
			flags |= unix.O_NOFOLLOW
		}
		fd, err := openat2(r.Path, flags, 0, r.NoFollow)
		if err != nil {
			return proto.Response{}, nil, err
		}
		defer fds.Close(fd)
		st, err := statFD(fd, filepath.Base(r.Path))
		if err != nil {
			return proto.Response{}, nil, err
		}
		return proto.Response{File: &proto.FileResp{Stat: &st}}, nil, nil
	case proto.OpReadDir:
		entries, more, err := readDir(r)
		if err != nil {
			return proto.Response{}, nil, err
		}
		return proto.Response{File: &proto.FileResp{Entries: entries, More: more}}, nil, nil
	case proto.OpMkdir:
		return proto.Response{}, nil, mkdir(r)
	case proto.OpRename:
		return proto.Response{}, nil, rename(r)
	case proto.OpRemove:
		return proto.Response{}, nil, remove(r)
	case proto.OpSymlink:
		dfd, base, err := openParent(r.Path2, r.NoFollow)
		if err != nil {
			return proto.Response{}, nil, err
		}
		defer fds.Close(dfd)
		return proto.Response{}, nil, unix.Symlinkat(r.Path, dfd, base)
	case proto.OpReadlink:
		dfd, base, err := openParent(r.Path, r.NoFollow)
		if err != nil {
			return proto.Response{}, nil, err
		}
		defer fds.Close(dfd)
		buf := make([]byte, proto.MaxPath)
		n, err := unix.Readlinkat(dfd, base, buf)
		if err != nil {
			return proto.Response{}, nil, err
		}
		return proto.Response{File: &proto.FileResp{Target: string(buf[:n])}}, nil, nil
	}
	return proto.Response{}, nil, proto.Invalidf("unknown file op %q", op)
}

func statFD(fd int, name string) (proto.Stat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return proto.Stat{}, err
	}
	return toStat(name, &st), nil
}

func toStat(name string, st *unix.Stat_t) proto.Stat {
	return proto.Stat{
		Name:    name,
		Size:    st.Size,
		Mode:    uint32(fileMode(st.Mode)),
		ModTime: st.Mtim.Nano(),
		UID:     int(st.Uid),
		GID:     int(st.Gid),
		Nlink:   uint64(st.Nlink), //nolint:unconvert // st_nlink is uint32 on arm64, uint64 on amd64
	}
}

// fileMode converts st_mode to fs.FileMode bits.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

func readDir(r *proto.FileReq) ([]proto.Stat, bool, error) {
	limit := r.Limit
	if limit <= 0 || limit > MaxDirEntries {
		limit = MaxDirEntries
	}
	if r.Offset < 0 {
		return nil, false, proto.Invalidf("negative offset")
	}
	fd, err := openat2(r.Path, unix.O_RDONLY|unix.O_DIRECTORY, 0, r.NoFollow)
	if err != nil {
		return nil, false, err
	}
	dir := os.NewFile(uintptr(fd), r.Path)
	defer func() { _ = dir.Close() }()
	skip := r.Offset
	var out []proto.Stat
	for {
		names, err := dir.Readdirnames(256)
		for _, n := range names {
			if skip > 0 {
				skip--
				continue
			}
			if len(out) == limit {
				return out, true, nil
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // removed meanwhile
			}
			out = append(out, toStat(n, &st))
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			return out, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

func mkdir(r *proto.FileReq) error {
	mode := r.Mode & 0o777
	if mode == 0 {
		mode = 0o755
	}
	if !r.Recursive {
		dfd, base, err := openParent(r.Path, r.NoFollow)
		if err != nil {
			return err
		}
		defer fds.Close(dfd)
		return unix.Mkdirat(dfd, base, mode)
	}
	// mkdir -p: walk down from the root, one component at a time, each
	// relative to the descriptor of the one before (no re-resolution).
	fd, err := openat2("/", unix.O_PATH|unix.O_DIRECTORY, 0, true)
	if err != nil {
		return err
	}
	for _, c := range strings.Split(strings.Trim(r.Path, "/"), "/") {
		err := unix.Mkdirat(fd, c, mode)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			fds.Close(fd)
			return err
		}
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolve(r.NoFollow) | unix.RESOLVE_BENEATH}
		next, err := unix.Openat2(fd, c, &how)
		fds.Close(fd)
		if err != nil {
			return err
		}
		fd = next
	}
	fds.Close(fd)
	return nil
}

func rename(r *proto.FileReq) error {
	ofd, obase, err := openParent(r.Path, r.NoFollow)
	if err != nil {
		return err
	}
	defer fds.Close(ofd)
	nfd, nbase, err := openParent(r.Path2, r.NoFollow)
	if err != nil {
		return err
	}
	defer fds.Close(nfd)
	flags := uint(0)
	if r.Flags&unix.O_EXCL != 0 {
		flags = unix.RENAME_NOREPLACE
	}
	return unix.Renameat2(ofd, obase, nfd, nbase, flags)
}

func remove(r *proto.FileReq) error {
	dfd, base, err := openParent(r.Path, r.NoFollow)
	if err != nil {
		return err
	}
	defer fds.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dfd, base, 0)
	}
	if r.Recursive {
		budget := maxRemoveEntries
		if err := removeTree(dfd, base, &budget); err != nil {
			return err
		}
	}
	return unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR)
}

// removeTree empties the directory name below dfd without following
// symlinks: every step is relative to an open directory descriptor.
func removeTree(dfd int, name string, budget *int) error {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(dfd, name, &how)
	if err != nil {
		return err
	}
	dir := os.NewFile(uintptr(fd), name)
	defer func() { _ = dir.Close() }()
	for {
		names, rerr := dir.Readdirnames(256)
		for _, n := range names {
			*budget--
			if *budget < 0 {
				return fmt.Errorf("remove: more than %d entries: %w", maxRemoveEntries, unix.EAGAIN)
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				if err := removeTree(fd, n, budget); err != nil {
					return err
				}
				if err := unix.Unlinkat(fd, n, unix.AT_REMOVEDIR); err != nil {
					return err
				}
				continue
			}
			if err := unix.Unlinkat(fd, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) || len(names) == 0 {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
