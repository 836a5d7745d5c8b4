package agent

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path"
	"strings"
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
	res, err := archive.Extract(ctx, src, format, root, rel, lim)
	resp.Result = res
	return err
}

func pack(r *TransferReq, w *os.File, resp *TransferResp) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(w.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return invalidf("pack writes to a pipe")
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
	if err := checkTree(root, rel, r.Deny, r.Limits.MaxEntries); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
	defer cancel()
	res, err := archive.Pack(ctx, w, root, rel, r.Format, r.Limits)
	resp.Result = res
	// The reader learns of the end from EOF (this descriptor and the
	// server's copy closed) and of a failure from the reply.
	_ = w.Close()
	return err
}

// errTreeDone ends checkTree's walk early.
var errTreeDone = errors.New("walk done")

// checkTree refuses to pack a tree that holds a name of the sensitive-path
// policy: the archive would carry it out of the sandbox, past the policy
// the file API applies. The walk never follows symlinks (fs.WalkDir on the
// root) and stops after maxEntries entries (Pack refuses more anyway).
func checkTree(root *os.Root, rel string, deny Deny, maxEntries int) error {
	seen := 0
	var found string
	err := fs.WalkDir(root.FS(), rel, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: Pack reports it
		}
		seen++
		if seen > maxEntries {
			return errTreeDone
		}
		if deny.Denied(path.Join("/", p)) {
			found = p
			return errTreeDone
		}
		return nil
	})
	if err != nil && !errors.Is(err, errTreeDone) {
		return err
	}
	if found != "" {
		entry := strings.TrimPrefix(strings.TrimPrefix(found, rel), "/")
		return &archive.Error{Entry: entry, Reason: "sensitive_path", Kind: archive.KindForbidden,
			Detail: "the directory holds a file the sensitive-path policy refuses; archive a directory without it"}
	}
	return nil
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
