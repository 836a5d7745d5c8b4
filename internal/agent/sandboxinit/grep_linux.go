package sandboxinit

import (
	"bytes"
	"io"
	"os"
	"path"
	"regexp"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"
)

// maxGrepFile bounds the bytes grep reads of one file when the request
// sets no smaller MaxFileSize: the file is held in memory while searched.
const maxGrepFile = 32 << 20

// binarySniff is how much of a file grep inspects for a NUL byte before
// treating it as binary and skipping it (as grep and ripgrep do).
const binarySniff = 8 << 10

// grep searches regular files below (or at) p. Go's regexp runs in time
// linear in the input, so a hostile pattern cannot stall the init; the
// bytes read are capped over the whole call.
func grep(p string, nofollow bool, r *proto.GrepReq) (*proto.GrepResp, error) {
	if len(r.Pattern) > proto.MaxPatternLen || r.Pattern == "" {
		return nil, proto.Invalidf("pattern empty or longer than %d bytes", proto.MaxPatternLen)
	}
	if err := proto.CheckPatterns(r.Include, r.Exclude, r.Deny.Names, r.Deny.Dirs, r.Deny.Paths); err != nil {
		return nil, err
	}
	expr := r.Pattern
	if r.Fixed {
		expr = regexp.QuoteMeta(expr)
	}
	flags := ""
	if r.CaseInsensitive {
		flags += "i"
	}
	if r.Multiline {
		flags += "s"
	}
	if flags != "" {
		expr = "(?" + flags + ")" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, proto.Invalidf("bad regular expression: %v", err)
	}
	g := &grepper{req: r, re: re, resp: &proto.GrepResp{Matches: []proto.GrepMatch{}}}
	g.max = r.MaxResults
	if g.max <= 0 || g.max > proto.MaxWalkResults {
		g.max = proto.MaxWalkResults
	}
	g.before, g.after = min(max(r.Before, 0), proto.MaxGrepContext), min(max(r.After, 0), proto.MaxGrepContext)
	g.fileCap = int64(maxGrepFile)
	if r.MaxFileSize > 0 && r.MaxFileSize < g.fileCap {
		g.fileCap = r.MaxFileSize
	}

	// A single file: search it alone.
	budget := maxSymlinks
	real, st, exists, err := resolveForGrep(p, nofollow, &budget)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, unix.ENOENT
	}
	if !os.FileMode(st.Mode).IsDir() {
		if r.Deny.Denied(real) {
			return nil, &proto.Error{Code: "EACCES", Msg: "path is sensitive"}
		}
		fd, err := openat2(real, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0, true)
		if err != nil {
			return nil, err
		}
		// Judged on the descriptor: a link made after the server's
		// resolve is caught here.
		if ost, err := statFD(fd, path.Base(real)); err != nil || (!r.Deny.AllowHardLinked && proto.HardLinked(real, ost.Mode, ost.Nlink)) {
			fds.Close(fd)
			if err != nil {
				return nil, err
			}
			return nil, &proto.Error{Code: "EACCES", Msg: "the file has more than one hard link"}
		}
		g.file(fd, real)
		fds.Close(fd)
		return g.resp, nil
	}
	fd, root, err := openRoot(real, true)
	if err != nil {
		return nil, err
	}
	defer fds.Close(fd)
	depth := proto.MaxWalkDepth
	if !r.Recursive {
		depth = 1
	}
	w := newWalker(root, depth, r.Exclude, r.Deny)
	w.visit = func(dirfd int, name, rel string, st *unix.Stat_t) bool {
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return true
		}
		if !r.Deny.AllowHardLinked && st.Nlink > 1 && proto.WritableTree(path.Join(root, rel)) != "" {
			return true // a second name of a file grep must not read
		}
		if len(r.Include) > 0 && !proto.MatchName(r.Include, name, rel) {
			return true
		}
		if st.Size > g.fileCap {
			return true
		}
		how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		ffd, err := unix.Openat2(dirfd, name, &how)
		if err != nil {
			return true
		}
		more := g.file(ffd, path.Join(root, rel))
		fds.Close(ffd)
		return more
	}
	w.dir(fd, "", 1)
	if w.cut {
		g.resp.Truncated = true
	}
	return g.resp, nil
}

func resolveForGrep(p string, nofollow bool, budget *int) (string, *proto.Stat, bool, error) {
	if nofollow {
		// The server resolved p already; refuse any symlink now in it.
		fd, err := openat2(p, unix.O_PATH, 0, true)
		if err != nil {
			return "", nil, false, err
		}
		defer fds.Close(fd)
		st, err := statFD(fd, path.Base(p))
		if err != nil {
			return "", nil, false, err
		}
		return p, &st, true, nil
	}
	return resolvePath(p, budget)
}

type grepper struct {
	req           *proto.GrepReq
	re            *regexp.Regexp
	resp          *proto.GrepResp
	max           int
	before, after int
	fileCap       int64
	read          int64
	bytes         int // reply size estimate
}

// file searches one open file; it returns false when the search is over
// (results full, byte budget spent).
func (g *grepper) file(fd int, name string) bool {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > g.fileCap {
		return true
	}
	if g.read+st.Size > proto.MaxGrepBytes {
		g.resp.Truncated = true
		return false
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) // close-on-exec: a command forked meanwhile must not inherit it
	if err != nil {
		return true
	}
	f := os.NewFile(uintptr(dup), name)
	data, err := io.ReadAll(io.LimitReader(f, g.fileCap))
	_ = f.Close()
	g.read += int64(len(data))
	if err != nil {
		return true
	}
	g.resp.FilesSearched++
	if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		return true
	}
	lines := splitLines(data)
	matched := false
	emit := func(line int) bool {
		if !matched && g.req.MaxFiles > 0 && g.resp.FilesMatched >= g.req.MaxFiles {
			g.resp.Truncated = true
			return false
		}
		matched = true
		g.resp.MatchCount++
		if g.resp.MatchCount <= g.req.Offset {
			return true
		}
		if len(g.resp.Matches) >= g.max || g.bytes > proto.MaxReplyBytes {
			g.resp.Truncated = true
			return false
		}
		m := proto.GrepMatch{File: name, Line: line + 1, Text: cut(lines[line])}
		for i := max(0, line-g.before); i < line; i++ {
			m.Before = append(m.Before, cut(lines[i]))
		}
		for i := line + 1; i <= min(len(lines)-1, line+g.after); i++ {
			m.After = append(m.After, cut(lines[i]))
		}
		g.bytes += len(name) + len(m.Text) + 64
		for _, l := range m.Before {
			g.bytes += len(l) + 4
		}
		for _, l := range m.After {
			g.bytes += len(l) + 4
		}
		g.resp.Matches = append(g.resp.Matches, m)
		return true
	}
	more := true
	if g.req.Multiline {
		// Line starts, to turn match offsets into line numbers.
		starts := []int{0}
		for i, c := range data {
			if c == '\n' && i+1 < len(data) {
				starts = append(starts, i+1)
			}
		}
		for _, loc := range g.re.FindAllIndex(data, -1) {
			line := min(lineOf(starts, loc[0]), len(lines)-1)
			if !emit(line) {
				more = false
				break
			}
		}
	} else {
		for i, l := range lines {
			if len(l) > proto.MaxGrepScanLine {
				break
			}
			if g.re.Match(l) && !emit(i) {
				more = false
				break
			}
		}
	}
	if matched {
		g.resp.FilesMatched++
	}
	return more
}

// lineOf returns the index of the last line start <= off.
func lineOf(starts []int, off int) int {
	lo, hi := 0, len(starts)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if starts[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// splitLines splits on '\n', dropping a final empty line and a '\r'
// before each '\n'.
func splitLines(data []byte) [][]byte {
	lines := bytes.Split(data, []byte{'\n'})
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte{'\r'})
	}
	if len(lines) == 0 {
		lines = [][]byte{{}}
	}
	return lines
}

// cut returns at most MaxGrepLine bytes of l as valid UTF-8.
func cut(l []byte) string {
	if len(l) > proto.MaxGrepLine {
		l = l[:proto.MaxGrepLine]
		for len(l) > 0 && !utf8.Valid(l) {
			l = l[:len(l)-1]
		}
	}
	return string(bytes.ToValidUTF8(l, []byte("\uFFFD")))
}
