package transfer

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// cleanupTimeout bounds removing a temp file after a failed upload (the
// request's own context may be gone: the client hung up).
const cleanupTimeout = 10 * time.Second

// UploadArgs is one streamed upload.
type UploadArgs struct {
	// Sandbox is the sandbox id; "" is the caller's default sandbox.
	dispatch.On
	// Path is the target file, or a directory (existing, or ending in
	// "/") to put Filename into; "" is /workspace/. With Extract it is the
	// destination directory.
	Path     string `json:"path,omitempty"`
	Filename string `json:"filename,omitempty"`
	// Extract unpacks the uploaded archive into Path instead of storing it.
	Extract bool           `json:"extract,omitempty"`
	Format  archive.Format `json:"format,omitempty"`
	// Stage streams the body into the staging area under this id instead
	// of to Path (staged.go): the form's path comes after its file.
	Stage string `json:"stage,omitempty"`
	// Staged moves (or, with Extract, unpacks) the file staged under this
	// id to Path; there is no body.
	Staged string `json:"staged,omitempty"`
	// Size is the announced body size, or -1: a body that cannot fit is
	// refused before a byte is written.
	Size int64 `json:"-"`
	// Body is the content; Run consumes it.
	Body io.Reader `json:"-"`
}

// UploadResult is AIO's FileUploadResult (plus what an extraction made).
type UploadResult struct {
	FilePath  string         `json:"file_path"`
	FileSize  int64          `json:"file_size"`
	Success   bool           `json:"success"`
	Extracted *ExtractResult `json:"extracted,omitempty"`
	// SandboxID is the sandbox that was written (for the audit record).
	SandboxID string `json:"-"`
}

// ExtractResult counts what an extraction wrote.
type ExtractResult struct {
	Dest     string `json:"dest"`
	Files    int    `json:"files"`
	Dirs     int    `json:"dirs"`
	Symlinks int    `json:"symlinks"`
	Bytes    int64  `json:"bytes"`
	Stripped int    `json:"stripped_mode_bits"`
	// SandboxID is the sandbox that was written (for the audit record).
	SandboxID string `json:"-"`
}

func extractResult(dest string, r archive.Result) *ExtractResult {
	return &ExtractResult{Dest: dest, Files: r.Files, Dirs: r.Dirs, Symlinks: r.Symlinks, Bytes: r.Bytes, Stripped: r.Stripped}
}

// writableTops are the trees the sandbox may write (its landlock rules).
var writableTops = [...]string{"/workspace", "/tmp", "/dev/shm"}

func writableTop(p string) (string, bool) {
	for _, t := range writableTops {
		if p == t || strings.HasPrefix(p, t+"/") {
			return t, true
		}
	}
	return "", false
}

// Upload streams a.Body into the sandbox: into a temp file next to the
// target, renamed into place once complete (or, with Extract, into an
// unnamed O_TMPFILE that the init unpacks and that vanishes with its
// descriptor). Nothing partial is ever visible or left behind.
func (s *Service) Upload(ctx context.Context, c auth.Caller, a UploadArgs) (UploadResult, error) {
	if a.Staged != "" {
		if a.Body != nil || a.Stage != "" {
			return UploadResult{}, fault.InvalidField("staged", "a staged upload is committed without a body")
		}
	} else if a.Body == nil {
		return UploadResult{}, fault.New(fault.Invalid, "an upload needs a request body (multipart field \"file\")")
	}
	sb, err := s.sandbox(ctx, c, a.Sandbox)
	if err != nil {
		return UploadResult{}, err
	}
	var target string
	switch {
	case a.Staged != "":
		return s.commitStaged(ctx, sb, a)
	case a.Stage != "":
		if target, err = s.stageTarget(ctx, sb, a.Stage); err != nil {
			return UploadResult{}, err
		}
	case a.Extract:
		return s.uploadExtract(ctx, sb, a)
	default:
		if target, err = s.uploadTarget(ctx, sb, a); err != nil {
			return UploadResult{}, err
		}
	}
	if err := s.fits(ctx, sb, parentOf(target), a.Size); err != nil {
		return UploadResult{}, err
	}
	n, err := s.writeFile(ctx, sb, target, a.Body)
	if err != nil {
		return UploadResult{}, err
	}
	return UploadResult{FilePath: target, FileSize: n, Success: true, SandboxID: sb.ID()}, nil
}

// writeFile streams body into target: into a temp file next to it, made
// durable, then renamed into place; on any failure the temp file goes.
func (s *Service) writeFile(ctx context.Context, sb *sandbox.Sandbox, target string, body io.Reader) (int64, error) {
	dir, base := parentOf(target), path.Base(target)
	if len(base) > 100 {
		base = base[:100]
	}
	tmp := path.Join(dir, "."+base+".sandhold-upload-"+randHex(8))
	_, f, err := sb.File(ctx, agent.OpOpen, agent.FileReq{Path: tmp, Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL, Mode: 0o644, NoFollow: true})
	if err != nil {
		return 0, fileError("upload", target, err)
	}
	n, err := copyCapped(ctx, f, body, s.uploadCap(sb))
	if err == nil {
		// Durable before visible: a crash leaves the old file or the
		// new one, never a torn one.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_, _, err = sb.File(ctx, agent.OpRename, agent.FileReq{Path: tmp, Path2: target, NoFollow: true})
	}
	if err != nil {
		s.removeQuiet(ctx, sb, tmp)
		return 0, fileError("upload", target, err)
	}
	return n, nil
}

// uploadTarget resolves where an upload goes.
func (s *Service) uploadTarget(ctx context.Context, sb *sandbox.Sandbox, a UploadArgs) (string, error) {
	p := a.Path
	if p == "" {
		p = "/workspace/"
	}
	name := a.Filename
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:] // browsers and curl may send a client path
	}
	dirOnly := strings.HasSuffix(p, "/") && p != "/"
	p = strings.TrimRight(p, "/")
	if p == "" {
		p = "/"
	}
	if err := checkPath("path", p); err != nil {
		return "", err
	}
	l, err := s.resolve(ctx, sb, "upload", p)
	if err != nil {
		return "", err
	}
	isDir := l.Exists && os.FileMode(l.Stat.Mode).IsDir()
	if !dirOnly && !isDir {
		return l.Resolved, nil
	}
	if err := safeName("filename", name); err != nil {
		return "", fault.InvalidField("path", "path names a directory and the upload has no usable file name")
	}
	if err := s.denied("upload", path.Join(p, name)); err != nil {
		return "", err
	}
	// The file in the directory is a path of its own: the same resolver
	// (a hard-linked or sensitive file under that name is refused).
	if l, err = s.resolve(ctx, sb, "upload", path.Join(l.Resolved, name)); err != nil {
		return "", err
	}
	return l.Resolved, nil
}

// fits refuses an upload whose announced size exceeds the free space of
// the target's file system (the quota) or the cap, before any write.
func (s *Service) fits(ctx context.Context, sb *sandbox.Sandbox, dir string, size int64) error {
	if size <= 0 {
		return nil
	}
	if size > s.uploadCap(sb) {
		return fault.New(fault.TooLarge, "upload "+dir+": "+errQuota)
	}
	_, free, err := sb.StatFS(ctx, dir)
	if err != nil {
		return nil // the write itself will tell
	}
	// multipartSlack: an announced multipart body carries some framing
	// around the file.
	const multipartSlack = 64 << 10
	if size > free+multipartSlack {
		return fault.New(fault.TooLarge, "upload "+dir+": "+errQuota)
	}
	return nil
}

// extractDest resolves an upload's extraction directory and its
// writable tree.
func (s *Service) extractDest(ctx context.Context, sb *sandbox.Sandbox, p string) (dest, top string, err error) {
	dest = strings.TrimRight(p, "/")
	if dest == "" {
		dest = "/workspace"
	}
	if err := checkPath("path", dest); err != nil {
		return "", "", err
	}
	dl, err := s.resolve(ctx, sb, "extract", dest)
	if err != nil {
		return "", "", err
	}
	dest = dl.Resolved
	top, ok := writableTop(dest)
	if !ok {
		return "", "", fault.InvalidField("path", "archives can only be extracted below /workspace, /tmp or /dev/shm")
	}
	return dest, top, nil
}

func (s *Service) uploadExtract(ctx context.Context, sb *sandbox.Sandbox, a UploadArgs) (UploadResult, error) {
	dest, top, err := s.extractDest(ctx, sb, a.Path)
	if err != nil {
		return UploadResult{}, err
	}
	if err := s.fits(ctx, sb, top, a.Size); err != nil {
		return UploadResult{}, err
	}
	// An unnamed file on the destination's file system: it counts against
	// the quota while it exists and disappears with its last descriptor.
	flags, err := tmpfileFlags()
	if err != nil {
		return UploadResult{}, err
	}
	_, f, err := sb.File(ctx, agent.OpOpen, agent.FileReq{Path: top, Flags: flags, Mode: 0o600})
	if err != nil {
		return UploadResult{}, fileError("upload", dest, err)
	}
	defer func() { _ = f.Close() }()
	n, err := copyCapped(ctx, f, a.Body, s.uploadCap(sb))
	if err != nil {
		return UploadResult{}, fileError("upload", dest, err)
	}
	res, err := sb.Extract(ctx, dest, a.Format, s.extractLimits(sb), s.cfg.Deny, f)
	if err != nil {
		return UploadResult{}, fileError("extract", dest, err)
	}
	return UploadResult{FilePath: dest, FileSize: n, Success: true, Extracted: extractResult(dest, res), SandboxID: sb.ID()}, nil
}

func (s *Service) extractLimits(sb *sandbox.Sandbox) archive.Limits {
	lim := s.cfg.Extract
	if q := sb.DiskLimit(); q > 0 && q < lim.MaxTotalBytes {
		lim.MaxTotalBytes = q
	}
	return lim
}

// removeQuiet removes a temp file, even when ctx is already cancelled.
func (s *Service) removeQuiet(ctx context.Context, sb *sandbox.Sandbox, p string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, _, err := sb.File(ctx, agent.OpRemove, agent.FileReq{Path: p}); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("remove upload temp file", "sandbox", sb.ID(), "err", err)
	}
}

// errCap is an upload past its cap.
var errCap = fault.New(fault.TooLarge, errQuota)

// copyCapped copies r to w, refusing more than limit bytes, and stops when
// ctx ends.
func copyCapped(ctx context.Context, w io.Writer, r io.Reader, limit int64) (int64, error) {
	buf := make([]byte, copyBuf)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		// Fill the buffer before writing: a multipart part returns a few
		// KiB per Read, and one write per Read would cost a syscall (and
		// a trip through the sandbox's file system) per few KiB.
		k, rerr := io.ReadFull(r, buf)
		if errors.Is(rerr, io.ErrUnexpectedEOF) {
			rerr = io.EOF
		}
		if k > 0 {
			if n+int64(k) > limit {
				return n, errCap
			}
			if _, err := w.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			return n, fault.Wrap(fault.Invalid, rerr, "the upload body ended early")
		}
	}
}
