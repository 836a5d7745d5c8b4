package sandboxinit

import (
	"errors"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"
)

// maxSymlinks bounds the dangling symlinks resolve follows by hand (the
// kernel's own limit for one lookup is 40).
const maxSymlinks = 40

// maxResolveRetries bounds how often resolve opens a name again whose file
// was replaced while it looked (each retry needs another concurrent
// rename, so a few suffice).
const maxResolveRetries = 8

// workspaceOp serves the workspace ops with the sandbox user's filesystem
// ids, like every file primitive.
func (s *server) workspaceOp(op proto.Op, r *proto.FileReq) (resp proto.Response, out []*os.File, err error) {
	if err := proto.CheckPath(r.Path); err != nil {
		return proto.Response{}, nil, err
	}
	if r.AsRoot && !s.setup.AllowRoot {
		return proto.Response{}, nil, &proto.Error{Code: "EPERM", Msg: "root file access is not enabled for this sandbox"}
	}
	err = s.asUser(r.AsRoot, func() error {
		switch op {
		case proto.OpResolve:
			budget := maxSymlinks
			real, st, exists, err := resolvePath(r.Path, &budget)
			if err != nil {
				return err
			}
			resp.File = &proto.FileResp{Target: real, Stat: st, Exists: exists}
			return nil
		case proto.OpOpenRead:
			f, st, err := openRead(r.Path, r.NoFollow)
			if err != nil {
				return err
			}
			resp.File = &proto.FileResp{Stat: &st}
			out = []*os.File{f}
			return nil
		case proto.OpWalk:
			if r.Walk == nil {
				return proto.Invalidf("walk without arguments")
			}
			w, err := walk(r.Path, r.NoFollow, r.Walk)
			if err != nil {
				return err
			}
			resp.File = &proto.FileResp{Walk: w}
			return nil
		case proto.OpGrep:
			if r.Grep == nil {
				return proto.Invalidf("grep without arguments")
			}
			g, err := grep(r.Path, r.NoFollow, r.Grep)
			if err != nil {
				return err
			}
			resp.File = &proto.FileResp{Grep: g}
			return nil
		}
		return proto.Invalidf("unknown workspace op %q", op)
	})
	return resp, out, err
}

// fdPath is the kernel's name of what fd refers to, as this process (the
// init, at the sandbox's root) sees it. It is what every check on a
// resolved path relies on: no string joining, no symlink left.
func fdPath(fd int) (string, error) {
	buf := make([]byte, proto.MaxPath+64)
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf)
	if err != nil {
		return "", err
	}
	p := string(buf[:n])
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return "", &proto.Error{Code: "ENOENT", Msg: "the file went away during the call"}
	}
	return p, nil
}

// resolvePath returns the kernel-resolved form of p: for an existing path
// the name of the file it reaches (symlinks followed, magic links
// refused); for a missing one the resolved form of its longest existing
// prefix with the rest appended — a dangling symlink is followed to where
// it points. The caller checks policy on the answer before it acts, and
// acts on it with RESOLVE_NO_SYMLINKS, so a symlink swapped in meanwhile
// fails the call instead of redirecting it.
func resolvePath(p string, budget *int) (string, *proto.Stat, bool, error) {
	fd, err := openat2(p, unix.O_PATH, 0, false)
	// A rename over the file between the open and the readlink leaves
	// the descriptor on an unlinked inode (an atomic write by another
	// call does exactly that): open the name again, a bounded number of
	// times.
	for try := 0; err == nil; try++ {
		real, perr := fdPath(fd)
		if perr == nil {
			st, serr := statFD(fd, path.Base(real))
			fds.Close(fd)
			if serr != nil {
				return "", nil, false, serr
			}
			return real, &st, true, nil
		}
		fds.Close(fd)
		if try == maxResolveRetries {
			return "", nil, false, perr
		}
		fd, err = openat2(p, unix.O_PATH, 0, false)
	}
	if !errors.Is(err, unix.ENOENT) || p == "/" {
		return "", nil, false, err
	}
	dir, base := path.Split(p)
	rdir, _, dexists, err := resolvePath(path.Clean(dir), budget)
	if err != nil {
		return "", nil, false, err
	}
	if !dexists {
		return path.Join(rdir, base), nil, false, nil
	}
	dfd, err := openat2(rdir, unix.O_PATH|unix.O_DIRECTORY, 0, true)
	if err != nil {
		return "", nil, false, err
	}
	defer fds.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return path.Join(rdir, base), nil, false, nil
		}
		return "", nil, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		// It appeared between the two lookups: ask to retry.
		return "", nil, false, &proto.Error{Code: "EAGAIN", Msg: "the path changed during the call"}
	}
	*budget--
	if *budget < 0 {
		return "", nil, false, unix.ELOOP
	}
	buf := make([]byte, proto.MaxPath)
	n, err := unix.Readlinkat(dfd, base, buf)
	if err != nil {
		return "", nil, false, err
	}
	target := string(buf[:n])
	if !strings.HasPrefix(target, "/") {
		target = path.Join(rdir, target)
	}
	target = path.Clean(target)
	if err := proto.CheckPath(target); err != nil {
		return "", nil, false, err
	}
	return resolvePath(target, budget)
}

// openRead opens a regular file for reading. O_NONBLOCK keeps a fifo
// swapped in for the file from blocking the init; anything but a regular
// file is refused after the open, on the descriptor itself.
func openRead(p string, nofollow bool) (*os.File, proto.Stat, error) {
	fd, err := openat2(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0, nofollow)
	if err != nil {
		return nil, proto.Stat{}, err
	}
	st, err := statFD(fd, path.Base(p))
	if err != nil {
		fds.Close(fd)
		return nil, proto.Stat{}, err
	}
	if os.FileMode(st.Mode).IsDir() {
		fds.Close(fd)
		return nil, proto.Stat{}, unix.EISDIR
	}
	if !os.FileMode(st.Mode).IsRegular() {
		fds.Close(fd)
		return nil, proto.Stat{}, &proto.Error{Code: proto.CodeNotRegular, Msg: "not a regular file"}
	}
	return os.NewFile(uintptr(fd), p), st, nil
}

// walker visits a tree below an open directory without following
// symlinks: every step is relative to an open directory descriptor with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS.
type walker struct {
	root     string // kernel-resolved path of the root
	maxDepth int
	hidden   bool
	exclude  []string
	deny     proto.Deny
	visited  int
	// depthCapped: maxDepth is the cap (MaxWalkDepth), not the caller's
	// choice, so a directory left unvisited at that depth cuts the walk.
	depthCapped bool
	// deadline ends the walk (cut) once passed: MaxWalkTime.
	deadline time.Time
	// cut is set when a cap stopped the walk early.
	cut bool
	// visit is called for every entry that passes the hidden, deny and
	// exclude filters; it returns false to end the walk.
	visit func(dirfd int, name, rel string, st *unix.Stat_t) bool
}

func (w *walker) dir(fd int, rel string, depth int) bool {
	names, err := readNames(fd, proto.MaxWalkVisit-w.visited+1)
	if err != nil {
		return true // unreadable directory: skip it, as find does
	}
	sort.Strings(names)
	for _, n := range names {
		w.visited++
		if w.visited > proto.MaxWalkVisit {
			w.cut = true
			return false
		}
		if w.visited%proto.WalkClockEvery == 0 && !w.deadline.IsZero() && time.Now().After(w.deadline) {
			w.cut = true
			return false
		}
		if !w.hidden && strings.HasPrefix(n, ".") {
			continue
		}
		childRel := n
		if rel != "" {
			childRel = rel + "/" + n
		}
		if w.deny.Denied(path.Join(w.root, childRel)) || proto.MatchName(w.exclude, n, childRel) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed meanwhile
		}
		if !w.visit(fd, n, childRel, &st) {
			return false
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		if depth >= w.maxDepth {
			// A tree deeper than the cap (a 3,000-level chain) is
			// reported as cut, not as complete.
			w.cut = w.cut || w.depthCapped
			continue
		}
		how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		cfd, err := unix.Openat2(fd, n, &how)
		if err != nil {
			continue
		}
		more := w.dir(cfd, childRel, depth+1)
		fds.Close(cfd)
		if !more {
			return false
		}
	}
	return true
}

// newWalker returns a walker of the tree at root (kernel-resolved) down
// to depth levels, with the time budget MaxWalkTime.
func newWalker(root string, depth int, exclude []string, deny proto.Deny) *walker {
	return &walker{root: root, maxDepth: depth, depthCapped: depth == proto.MaxWalkDepth, exclude: exclude, deny: deny,
		deadline: time.Now().Add(proto.MaxWalkTime)}
}

// readNames reads up to limit names of the open directory fd (without
// closing it).
func readNames(fd int, limit int) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) // close-on-exec: a command forked meanwhile must not inherit it
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(dup), "dir")
	defer func() { _ = d.Close() }() // a read-only duplicate
	var out []string
	for len(out) < limit {
		names, err := d.Readdirnames(256)
		out = append(out, names...)
		if errors.Is(err, io.EOF) || len(names) == 0 {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func openRoot(p string, nofollow bool) (int, string, error) {
	fd, err := openat2(p, unix.O_RDONLY|unix.O_DIRECTORY, 0, nofollow)
	if err != nil {
		return -1, "", err
	}
	real, err := fdPath(fd)
	if err != nil {
		fds.Close(fd)
		return -1, "", err
	}
	return fd, real, nil
}

func walk(p string, nofollow bool, r *proto.WalkReq) (*proto.WalkResp, error) {
	if err := proto.CheckPatterns(r.Names, r.Exclude, r.Extensions, r.Deny.Names, r.Deny.Dirs, r.Deny.Paths, []string{r.Pattern}); err != nil {
		return nil, err
	}
	limit := r.Limit
	if limit <= 0 || limit > proto.MaxWalkResults {
		limit = proto.MaxWalkResults
	}
	depth := r.MaxDepth
	if depth <= 0 || depth > proto.MaxWalkDepth {
		depth = proto.MaxWalkDepth
	}
	fd, root, err := openRoot(p, nofollow)
	if err != nil {
		return nil, err
	}
	defer fds.Close(fd)
	resp := &proto.WalkResp{Root: root, Entries: []proto.WalkEntry{}}
	var all []proto.WalkEntry
	w := newWalker(root, depth, r.Exclude, r.Deny)
	w.hidden = r.Hidden
	w.visit = func(_ int, name, rel string, st *unix.Stat_t) bool {
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if r.FilesOnly && isDir {
			return true
		}
		if r.Pattern != "" && !proto.MatchGlob(r.Pattern, rel) {
			return true
		}
		if len(r.Names) > 0 && !proto.MatchName(r.Names, name, rel) {
			return true
		}
		if len(r.Extensions) > 0 && (isDir || !hasExtension(name, r.Extensions)) {
			return true
		}
		all = append(all, toStat(rel, st))
		return true
	}
	w.dir(fd, "", 1)
	sortEntries(all, r.Sort, r.Desc)
	resp.Total = len(all)
	resp.Truncated = w.cut
	size := 0
	for _, e := range all {
		size += len(e.Name) + 128
		if len(resp.Entries) == limit || size > proto.MaxReplyBytes {
			resp.Truncated = true
			break
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

func hasExtension(name string, exts []string) bool {
	for _, e := range exts {
		if e != "" && strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}

// sortEntries orders walk results; ties break on the path, so the order is
// total and stable across calls.
func sortEntries(es []proto.WalkEntry, by string, desc bool) {
	isDir := func(e proto.WalkEntry) bool { return os.FileMode(e.Mode).IsDir() }
	less := func(a, b proto.WalkEntry) int {
		switch by {
		case "name":
			if c := strings.Compare(path.Base(a.Name), path.Base(b.Name)); c != 0 {
				return c
			}
		case "size":
			if a.Size != b.Size {
				return cmpInt(a.Size, b.Size)
			}
		case "modified":
			if a.ModTime != b.ModTime {
				return cmpInt(a.ModTime, b.ModTime)
			}
		case "type":
			if isDir(a) != isDir(b) {
				if isDir(a) {
					return -1
				}
				return 1
			}
		}
		return strings.Compare(a.Name, b.Name)
	}
	sort.SliceStable(es, func(i, j int) bool {
		c := less(es[i], es[j])
		if desc {
			return c > 0
		}
		return c < 0
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
