package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/archive"
)

// Bounds of the transfer ops, with their reasons.
const (
	// transferTimeout bounds one extraction or packing so a stuck client
	// (a pipe nobody reads) cannot pin an init goroutine forever.
	transferTimeout = 30 * time.Minute
)

// writableTops are the trees an extraction may write into: the ones
// landlock leaves writable. The destination is opened as an *os.Root on
// its top, so nothing — not a symlink on the way, not one planted during
// the extraction — leads a write out of that tree.
var writableTops = [...]string{"/workspace", "/tmp", "/dev/shm"}

// splitTop returns the writable top holding p and p relative to it.
func splitTop(p string) (top, rel string, ok bool) {
	for _, t := range writableTops {
		if p == t {
			return t, ".", true
		}
		if strings.HasPrefix(p, t+"/") {
			return t, p[len(t)+1:], true
		}
	}
	return "", "", false
}

func (s *server) transferOp(op Op, r *TransferReq, files []*os.File) (Response, []*os.File, error) {
	if err := CheckPath(r.Path); err != nil {
		return Response{}, nil, err
	}
	var resp TransferResp
	var err error
	switch op {
	case OpStatFS:
		err = s.asUser(false, func() error {
			var st unix.Statfs_t
			if err := unix.Statfs(r.Path, &st); err != nil {
				return err
			}
			resp.Total = blocksBytes(st.Blocks, st.Bsize)
			resp.Free = blocksBytes(st.Bavail, st.Bsize)
			return nil
		})
	case OpExtract:
		if len(files) != 1 {
			return Response{}, nil, invalidf("extract needs exactly one archive descriptor")
		}
		err = s.asUser(false, func() error { return extract(r, files[0], &resp) })
	case OpPack:
		if len(files) != 1 {
			return Response{}, nil, invalidf("pack needs exactly one pipe descriptor")
		}
		err = s.asUser(false, func() error { return pack(r, files[0], &resp) })
	default:
		return Response{}, nil, invalidf("unknown transfer op %q", op)
	}
	if err != nil {
		var ae *archive.Error
		if errors.As(err, &ae) {
			resp.Refused = &Refusal{Entry: ae.Entry, Reason: ae.Reason, Kind: ae.Kind, Detail: ae.Detail}
			return Response{Transfer: &resp}, nil, nil
		}
		return Response{}, nil, err
	}
	return Response{Transfer: &resp}, nil, nil
}

func extract(r *TransferReq, src *os.File, resp *TransferResp) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return invalidf("the archive must be a regular file")
	}
	top, rel, ok := splitTop(r.Path)
	if !ok {
		return &Error{Code: "EROFS", Msg: "archives can only be extracted below /workspace, /tmp or /dev/shm"}
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	lim := r.Limits
	var fs unix.Statfs_t
	if err := unix.Statfs(top, &fs); err != nil {
		return err
	}
	// The extraction may write at most what the file system has left
	// (the workspace quota); the kernel refuses any byte more anyway, but
	// refusing here names the rule and leaves nothing staged.
	lim.MaxTotalBytes = min(lim.MaxTotalBytes, blocksBytes(fs.Bavail, fs.Bsize))
	format := r.Format
	if format == "" {
		format, err = archive.Detect(src, st.Size)
		if err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	// Each target is judged by the sensitive-path policy before a byte
	// is written: an archive must not plant .ssh/authorized_keys or .env
	// where no file call may write.
	check := func(name string) error {
		if r.Deny.Denied(path.Join(r.Path, name)) {
			return &archive.Error{Entry: name, Reason: reasonSensitive, Kind: archive.KindForbidden,
				Detail: "the archive writes a path the sensitive-path policy refuses"}
		}
		return nil
	}
	res, err := archive.ExtractChecked(ctx, src, format, root, rel, lim, check)
	resp.Result = res
	return err
}

// reasonSensitive and reasonHardLinked are the refusals of the
// sensitive-path policy in archives.
const (
	reasonSensitive  = "sensitive_path"
	reasonHardLinked = "hard_linked_file"
)

func pack(r *TransferReq, w *os.File, resp *TransferResp) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(w.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return invalidf("pack writes to a pipe")
	}
	lim := r.Limits
	// The check walk holds one descriptor per level; Pack must not go
	// deeper than it looked.
	lim.MaxDepth = min(lim.MaxDepth, MaxWalkDepth-1)
	// The check walk first: a refusal (sensitive or hard-linked file, a
	// tree too deep or too large, the time budget) comes before the first
	// byte, so the client gets a clear 4xx instead of a cut stream.
	if err := checkTree(r.Path, r.Deny, lim); err != nil {
		return err
	}
	root, err := os.OpenRoot("/")
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	rel := strings.TrimPrefix(r.Path, "/")
	if rel == "" {
		rel = "."
	}
	ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	// And the same policy on every entry as it is packed, judged on its
	// descriptor: a file renamed or linked after the check walk is
	// caught here (the stream is then cut, never completed).
	check := func(name string, fi fs.FileInfo) error {
		return entryPolicy(path.Join(r.Path, name), name, fi, r.Deny)
	}
	res, err := archive.PackChecked(ctx, w, root, rel, r.Format, lim, check)
	resp.Result = res
	// The reader learns of the end from EOF (this descriptor and the
	// server's copy closed) and of a failure from the reply.
	_ = w.Close()
	return err
}

// entryPolicy is the sensitive-path policy for one object an archive
// would carry out: its absolute path p, its name in the archive and what
// its descriptor (or fstatat without following) says.
func entryPolicy(p, name string, fi fs.FileInfo, deny Deny) error {
	if deny.Denied(p) {
		return &archive.Error{Entry: name, Reason: reasonSensitive, Kind: archive.KindForbidden,
			Detail: "the directory holds a file the sensitive-path policy refuses; archive a directory without it"}
	}
	if !deny.AllowHardLinked && fi.Mode().IsRegular() && WritableTree(p) != "" {
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
			return &archive.Error{Entry: name, Reason: reasonHardLinked, Kind: archive.KindForbidden,
				Detail: "the directory holds a file with more than one hard link (it may be a second name of a sensitive file); archive a directory without it"}
		}
	}
	return nil
}

// checkTree walks the tree at p (never following symlinks, one open
// directory per level) and refuses to pack it when it holds a name of the
// sensitive-path policy or a hard-linked file (the archive would carry it
// out, past the policy the file API applies), a name deeper than
// lim.MaxDepth or longer than lim.MaxPathLen, more than lim.MaxEntries
// objects, or when the walk runs past MaxWalkTime. Every refusal names
// the rule; none of them needs the whole tree in memory.
func checkTree(p string, deny Deny, lim archive.Limits) error {
	fd, root, err := openRoot(p, true)
	if err != nil {
		return err
	}
	defer closeFD(fd)
	var refusal error
	seen := 0
	// depth lim.MaxDepth+1: far enough to see the first name too deep.
	w := newWalker(root, min(lim.MaxDepth+1, MaxWalkDepth), nil, Deny{})
	w.hidden = true
	w.visit = func(_ int, _, rel string, st *unix.Stat_t) bool {
		seen++
		switch {
		case seen > lim.MaxEntries:
			refusal = &archive.Error{Entry: rel, Reason: archive.ReasonTooManyEntries, Kind: archive.KindTooLarge,
				Detail: fmt.Sprintf("the directory holds more than %d entries", lim.MaxEntries)}
		case strings.Count(rel, "/")+1 > lim.MaxDepth:
			refusal = &archive.Error{Entry: rel, Reason: archive.ReasonTooDeep, Kind: archive.KindTooLarge,
				Detail: fmt.Sprintf("the directory is more than %d levels deep", lim.MaxDepth)}
		case len(rel) > lim.MaxPathLen:
			refusal = &archive.Error{Entry: rel, Reason: archive.ReasonNameTooLong, Kind: archive.KindTooLarge}
		default:
			refusal = entryPolicy(path.Join(root, rel), rel, statInfo{rel, st}, deny)
		}
		return refusal == nil
	}
	w.dir(fd, "", 1)
	if refusal != nil {
		return refusal
	}
	if w.cut {
		// Neither a refusal above nor the depth (checked by name):
		// the visit cap or the time budget ended the walk.
		return &archive.Error{Reason: reasonTreeTooSlow, Kind: archive.KindTooLarge,
			Detail: fmt.Sprintf("the directory could not be checked within %s or %d entries; archive a smaller one", MaxWalkTime, MaxWalkVisit)}
	}
	return nil
}

// reasonTreeTooSlow: the check walk ran out of time or visits.
const reasonTreeTooSlow = "tree_too_large"

// statInfo is an fs.FileInfo over a stat the walk already has.
type statInfo struct {
	name string
	st   *unix.Stat_t
}

func (s statInfo) Name() string       { return path.Base(s.name) }
func (s statInfo) Size() int64        { return s.st.Size }
func (s statInfo) Mode() fs.FileMode  { return fileMode(s.st.Mode) }
func (s statInfo) ModTime() time.Time { return time.Unix(0, s.st.Mtim.Nano()) }
func (s statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s statInfo) Sys() any {
	return &syscall.Stat_t{Nlink: s.st.Nlink, Mode: s.st.Mode, Size: s.st.Size}
}

// blocksBytes is n blocks of size bytes, saturating instead of overflowing.
func blocksBytes(n uint64, size int64) int64 {
	if size <= 0 {
		return 0
	}
	if n > uint64(math.MaxInt64/size) { //nolint:gosec // G115: size > 0 was checked
		return math.MaxInt64
	}
	return int64(n) * size //nolint:gosec // G115: bounded by the check above
}
