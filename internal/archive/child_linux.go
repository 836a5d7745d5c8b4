package archive

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/archive/deny"
	"github.com/sandhold/sandhold/internal/archive/spec"
)

// The sandbox init links package spec, not this one; it runs the program
// that does (cmd/sandhold-archive, or this binary) for each extract or
// pack, and sandboxinit.Entry hands such a start to spec.Child.
func init() { spec.Child = ChildMain }

// maxChildReq bounds the request the extractor reads (a deny list and
// limits: a few KiB).
const maxChildReq = 1 << 20

// ChildMain is the extractor program: one spec.ChildReq on stdin, the
// archive or pipe at spec.ChildFD, one spec.ChildResp on stdout. It runs
// inside the sandbox as the init's child, like a command (same
// namespaces, landlock ruleset, seccomp filter, user, no capabilities).
// It returns the exit status: 0 when a reply was written (a refusal
// included), 2 when none could be.
func ChildMain() int {
	var req spec.ChildReq
	var resp spec.ChildResp
	b, err := io.ReadAll(io.LimitReader(os.Stdin, maxChildReq))
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err == nil {
		f := os.NewFile(spec.ChildFD, "archive")
		resp.Result, err = runChild(&req, f)
		_ = f.Close()
	}
	if err != nil {
		var ae *Error
		var n syscall.Errno
		switch {
		case errors.As(err, &ae):
			r := *ae
			r.Err = nil
			resp.Refused = &r
		case errors.As(err, &n) && unix.ErrnoName(n) != "":
			resp.Failed, resp.Code, resp.Msg = true, unix.ErrnoName(n), err.Error()
		default:
			resp.Failed, resp.Msg = true, err.Error()
		}
	}
	out, err := json.Marshal(&resp)
	if err != nil {
		return 2
	}
	if _, err := os.Stdout.Write(out); err != nil {
		return 2
	}
	return 0
}

func runChild(req *spec.ChildReq, f *os.File) (Result, error) {
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		return Result{}, errors.New("extractor: no time budget")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	root, err := os.OpenRoot(req.Top)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = root.Close() }()
	switch req.Op {
	case spec.ChildExtract:
		return childExtract(ctx, req, f, root)
	case spec.ChildPack:
		return childPack(ctx, req, f, root)
	}
	return Result{}, errors.New("extractor: unknown op")
}

func childExtract(ctx context.Context, req *spec.ChildReq, src *os.File, root *os.Root) (Result, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return Result{}, err
	}
	lim := req.Limits
	var sfs unix.Statfs_t
	if err := unix.Statfs(req.Top, &sfs); err != nil {
		return Result{}, err
	}
	// The extraction may write at most what the file system has left
	// (the workspace quota); the kernel refuses any byte more anyway, but
	// refusing here names the rule and leaves nothing staged.
	lim.MaxTotalBytes = min(lim.MaxTotalBytes, spec.BlocksBytes(sfs.Bavail, sfs.Bsize))
	format := req.Format
	if format == "" {
		var err error
		if format, err = Detect(src, st.Size); err != nil {
			return Result{}, err
		}
	}
	// Each target is judged by the sensitive-path policy before a byte
	// is written: an archive must not plant .ssh/authorized_keys or .env
	// where no file call may write.
	check := func(name string) error {
		if req.Deny.Denied(path.Join(req.Path, name)) {
			return &Error{Entry: name, Reason: deny.ReasonSensitive, Kind: KindForbidden,
				Detail: "the archive writes a path the sensitive-path policy refuses"}
		}
		return nil
	}
	return ExtractChecked(ctx, src, format, root, req.Rel, lim, check)
}

func childPack(ctx context.Context, req *spec.ChildReq, w *os.File, root *os.Root) (Result, error) {
	// The same policy on every entry as it is packed, judged on its
	// descriptor: a file renamed or linked after the init's check walk is
	// caught here (the stream is then cut, never completed).
	check := func(name string, fi fs.FileInfo) error {
		return spec.PackPolicy(path.Join(req.Path, name), name, fi, req.Deny)
	}
	res, err := PackChecked(ctx, w, root, req.Rel, req.Format, req.Limits, check)
	// The reader learns of the end from EOF and of a failure from the reply.
	_ = w.Close()
	return res, err
}
