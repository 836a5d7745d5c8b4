package transfer

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/workspace"
)

// DownloadArgs names a file to stream out.
type DownloadArgs struct {
	dispatch.On
	Path string `json:"path" required:"true"`
}

// Download is an opened regular file for the handler to stream (with
// http.ServeContent: Range, If-Range, HEAD). The handler closes File.
type Download struct {
	File *os.File
	// SandboxID is the sandbox read from (for the audit record).
	SandboxID string
	Path      string
	Size      int64
	ModTime   time.Time
	stamp     stamp
}

// ErrChanged is a download whose file changed while it was being sent
// (change_policy=abort); the edge answers 409 when nothing was sent yet.
var ErrChanged = fault.New(fault.Conflict, "the file changed during the download (change_policy=abort)")

// stamp is what identifies one version of a file's content.
type stamp struct {
	size         int64
	mtime, ctime int64
}

func stampOf(f *os.File) (stamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return stamp{}, err
	}
	return stamp{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, nil
}

// Changed reports whether the file differs from when it was opened (any
// write, truncation or metadata change through any path moves ctime).
func (d *Download) Changed() bool {
	now, err := stampOf(d.File)
	return err != nil || now != d.stamp
}

// Name is the file's base name.
func (d *Download) Name() string { return path.Base(d.Path) }

// Content returns what to serve: the file itself (so the server can use
// sendfile), or with abort a reader that fails with ErrChanged as soon as
// the file changed.
func (d *Download) Content(abort bool) io.ReadSeeker {
	if !abort {
		return d.File
	}
	return &watchedFile{d: d}
}

type watchedFile struct{ d *Download }

func (w *watchedFile) Read(p []byte) (int, error) {
	if w.d.Changed() {
		return 0, ErrChanged
	}
	n, err := w.d.File.Read(p)
	if n > 0 && w.d.Changed() {
		return 0, ErrChanged
	}
	return n, err
}

func (w *watchedFile) Seek(off int64, whence int) (int64, error) { return w.d.File.Seek(off, whence) }

// Download opens a regular file inside the sandbox for reading.
func (s *Service) Download(ctx context.Context, c auth.Caller, a DownloadArgs) (*Download, error) {
	if err := checkPath("path", a.Path); err != nil {
		return nil, err
	}
	sb, err := s.sandbox(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	l, err := s.resolve(ctx, sb, "download", a.Path)
	if err != nil {
		return nil, err
	}
	d, err := openRegular(ctx, sb, "download", l)
	if d != nil {
		d.Path, d.SandboxID = a.Path, sb.ID()
	}
	return d, err
}

type opener interface {
	File(ctx context.Context, op agent.Op, r agent.FileReq) (*agent.FileResp, *os.File, error)
}

// openRegular opens a located regular file for reading and judges it by
// its descriptor (workspace.CheckOpened: a hard link made after the
// resolve is refused). Messages name the path as given.
func openRegular(ctx context.Context, sb opener, op string, l workspace.Located) (*Download, error) {
	p := l.Given
	// openread: regular files only (a fifo planted at the path cannot
	// hang the init), no symlink as the last component.
	_, f, err := sb.File(ctx, agent.OpOpenRead, agent.FileReq{Path: l.Resolved, NoFollow: true})
	if err != nil {
		var pe *agent.Error
		switch {
		case errors.Is(err, syscall.EISDIR):
			return nil, fault.InvalidField("path", p+": is a directory (use /v1/file/archive)")
		case errors.As(err, &pe) && pe.Code == agent.CodeNotRegular:
			return nil, fault.InvalidField("path", p+": not a regular file")
		}
		return nil, fileError("open", p, err)
	}
	if _, err := workspace.CheckOpened(op, l, f); err != nil {
		closeQuiet(f)
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		closeQuiet(f)
		return nil, fileError("open", p, err)
	}
	sp, err := stampOf(f)
	if err != nil {
		closeQuiet(f)
		return nil, fileError("download", p, err)
	}
	return &Download{File: f, Path: p, Size: st.Size(), ModTime: st.ModTime(), stamp: sp}, nil
}

// ExtractArgs unpacks an archive that is already in the sandbox.
type ExtractArgs struct {
	dispatch.On
	Path   string         `json:"path" required:"true" doc:"the archive, e.g. /workspace/src.tar.gz"`
	Dest   string         `json:"dest,omitempty" doc:"the destination directory (default: the archive's directory)"`
	Format archive.Format `json:"format,omitempty" enum:"zip,tar,tar.gz,tar.zst" doc:"zip, tar, tar.gz or tar.zst (default: detected)"`
}

// Extract unpacks an archive inside the sandbox, by its init, all or
// nothing.
func (s *Service) Extract(ctx context.Context, c auth.Caller, a ExtractArgs) (*ExtractResult, error) {
	if err := checkPath("path", a.Path); err != nil {
		return nil, err
	}
	dest := strings.TrimRight(a.Dest, "/")
	if dest == "" {
		dest = parentOf(a.Path)
	}
	if err := checkPath("dest", dest); err != nil {
		return nil, err
	}
	if _, ok := writableTop(dest); !ok {
		return nil, fault.InvalidField("dest", "archives can only be extracted below /workspace, /tmp or /dev/shm")
	}
	sb, err := s.sandbox(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	src, err := s.resolve(ctx, sb, "extract", a.Path)
	if err != nil {
		return nil, err
	}
	dl, err := s.resolve(ctx, sb, "extract", dest)
	if err != nil {
		return nil, err
	}
	dest = dl.Resolved
	if _, ok := writableTop(dest); !ok {
		return nil, fault.InvalidField("dest", "archives can only be extracted below /workspace, /tmp or /dev/shm")
	}
	d, err := openRegular(ctx, sb, "extract", src)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.File.Close() }()
	res, err := sb.Extract(ctx, dest, a.Format, s.extractLimits(sb), s.cfg.Deny, d.File)
	if err != nil {
		return nil, fileError("extract", dest, err)
	}
	x := extractResult(dest, res)
	x.SandboxID = sb.ID()
	return x, nil
}

// ArchiveArgs streams a directory out as an archive.
type ArchiveArgs struct {
	dispatch.On
	Path   string         `json:"path" required:"true"`
	Format archive.Format `json:"format,omitempty" enum:"tar.gz,zip,tar,tar.zst"`
}

// Packed is a directory being packed; the handler streams Body and closes
// it. A failure while packing surfaces as Body's read error: the handler
// must then abort the response (it is partial).
type Packed struct {
	Body        io.ReadCloser
	Name        string
	ContentType string
}

// Archive starts packing a directory inside the sandbox (tar.gz or zip).
func (s *Service) Archive(ctx context.Context, c auth.Caller, a ArchiveArgs) (*Packed, error) {
	if err := checkPath("path", a.Path); err != nil {
		return nil, err
	}
	ct, ext := "", ""
	switch a.Format {
	case "", archive.FormatTarGz:
		a.Format, ct, ext = archive.FormatTarGz, "application/gzip", ".tar.gz"
	case archive.FormatZip:
		ct, ext = "application/zip", ".zip"
	case archive.FormatTar:
		ct, ext = "application/x-tar", ".tar"
	case archive.FormatTarZst:
		ct, ext = "application/zstd", ".tar.zst"
	default:
		return nil, fault.InvalidField("format", "format must be tar.gz, zip, tar or tar.zst")
	}
	sb, err := s.sandbox(ctx, c, a.Sandbox)
	if err != nil {
		return nil, err
	}
	l, err := s.resolve(ctx, sb, "archive", a.Path)
	if err != nil {
		return nil, err
	}
	if !l.Exists {
		return nil, fault.New(fault.NotFound, "archive "+a.Path+": no such directory")
	}
	if !os.FileMode(l.Stat.Mode).IsDir() {
		return nil, fault.InvalidField("path", "archive "+a.Path+": not a directory")
	}
	lim := s.cfg.Extract
	lim.MaxEntries = maxPackEntries
	lim.MaxTotalBytes = max(sb.DiskLimit(), lim.MaxTotalBytes)
	lim.MaxEntryBytes = lim.MaxTotalBytes
	body, err := sb.Pack(context.WithoutCancel(ctx), l.Resolved, a.Format, lim, s.cfg.Deny)
	if err != nil {
		return nil, fileError("archive", a.Path, err)
	}
	name := path.Base(a.Path)
	if name == "/" {
		name = "root"
	}
	return &Packed{Body: faultReader{body, a.Path}, Name: name + ext, ContentType: ct}, nil
}

// faultReader turns the packing's failure into the client-safe fault the
// handler shows (before the first byte) or logs (after it).
type faultReader struct {
	io.ReadCloser
	path string
}

func (f faultReader) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fileError("archive", f.path, err)
	}
	return n, err
}
