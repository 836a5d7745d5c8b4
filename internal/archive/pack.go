package archive

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
)

// readDirBatch bounds one ReadDir call so a huge directory is listed in
// steps and refused once it passes MaxEntries.
const readDirBatch = 256

// Pack streams the tree under dir (inside src) to w as an archive of the
// given format, without buffering it. Regular files and directories are
// packed; symlinks (never followed), devices, fifos, sockets and names that
// Extract would refuse (control characters, backslashes, invalid UTF-8) are
// skipped and counted in Result.Skipped. setuid/setgid/sticky bits are
// dropped from the packed modes (Result.Stripped); owners are not recorded.
// MaxEntries, MaxTotalBytes, MaxEntryBytes, MaxDepth and MaxPathLen are
// enforced (refused with an *Error); the ratio caps do not apply. On error,
// w holds a partial archive: callers streaming to a client must abort the
// response rather than finish it.
func Pack(ctx context.Context, w io.Writer, src *os.Root, dir string, format Format, lim Limits) (Result, error) {
	return PackChecked(ctx, w, src, dir, format, lim, nil)
}

// EntryCheck judges one entry Pack is about to emit, by what its own
// descriptor says: name is slash-separated and relative to the packed
// directory. A non-nil error refuses the packing (an *Error as it is,
// anything else as a forbidden entry). It lets the caller apply a policy
// the archive code does not know (sensitive names, hard-linked files) at
// the moment of packing, not only in a walk before it.
type EntryCheck func(name string, fi fs.FileInfo) error

// PackChecked is Pack with check applied to every directory and regular
// file before it is emitted (nil: none).
func PackChecked(ctx context.Context, w io.Writer, src *os.Root, dir string, format Format, lim Limits, check EntryCheck) (Result, error) {
	if err := lim.Validate(); err != nil {
		return Result{}, err
	}
	if dir == "" {
		dir = "."
	}
	sr, err := src.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Result{}, &Error{Kind: KindInvalid, Reason: ReasonIO, Detail: "no such directory", Err: err}
		}
		return Result{}, ioError("", err)
	}
	defer sr.Close() //nolint:errcheck // a root handle, only read from
	aw, err := newArchiveWriter(w, format)
	if err != nil {
		return Result{}, err
	}
	top, err := sr.Open(".")
	if err != nil {
		return Result{}, ioError("", err)
	}
	defer top.Close() //nolint:errcheck // read-only directory handle
	pk := &packer{ctx: ctx, lim: lim, w: aw, buf: make([]byte, copyBufSize), check: check}
	if err := pk.walkDir(top, "", 0); err != nil {
		return pk.res, err
	}
	if err := aw.close(); err != nil {
		return pk.res, ioError("", err)
	}
	return pk.res, nil
}

type packer struct {
	ctx     context.Context
	lim     Limits
	w       archiveWriter
	buf     []byte
	res     Result
	visited int
	check   EntryCheck
}

// walkDir packs the children of the open directory d, named rel ("" for
// the root), sorted by name. Children are opened relative to d with
// O_NOFOLLOW, so a symlink swapped in after the listing is never followed.
// Recursion depth is bounded by MaxDepth.
func (pk *packer) walkDir(d *os.File, rel string, depth int) error {
	var ents []fs.DirEntry
	for {
		batch, err := d.ReadDir(readDirBatch)
		ents = append(ents, batch...)
		pk.visited += len(batch)
		if pk.visited > pk.lim.MaxEntries {
			return refuse(rel, KindTooLarge, ReasonTooManyEntries, "")
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return ioError(rel, err)
		}
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, de := range ents {
		if err := pk.ctx.Err(); err != nil {
			return &Error{Entry: rel, Kind: KindCanceled, Reason: ReasonCanceled, Err: err}
		}
		name := de.Name()
		if rel != "" {
			name = rel + "/" + name
		}
		t := de.Type()
		if (t != 0 && !t.IsDir()) || checkChars(name) != nil {
			pk.res.Skipped++
			continue
		}
		if len(name) > pk.lim.MaxPathLen {
			return refuse(name, KindTooLarge, ReasonNameTooLong, "")
		}
		if depth+1 > pk.lim.MaxDepth {
			return refuse(name, KindTooLarge, ReasonTooDeep, "")
		}
		f, err := openNoFollow(d, de.Name(), t.IsDir())
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || isLoop(err) {
				pk.res.Skipped++ // removed, or swapped for a symlink, since the listing
				continue
			}
			return ioError(name, err)
		}
		err = pk.entry(f, name, depth)
		_ = f.Close() // opened read-only: a close error cannot lose data
		if err != nil {
			return err
		}
	}
	return nil
}

// entry packs one opened object, judged by its descriptor, not its name.
func (pk *packer) entry(f *os.File, name string, depth int) error {
	fi, err := f.Stat()
	if err != nil {
		return ioError(name, err)
	}
	if pk.check != nil && (fi.IsDir() || fi.Mode().IsRegular()) {
		if err := pk.check(name, fi); err != nil {
			return asError(name, err, KindForbidden, ReasonPolicy)
		}
	}
	switch {
	case fi.IsDir():
		if err := pk.w.dir(name, pk.perm(fi.Mode()), fi.ModTime()); err != nil {
			return ioError(name, err)
		}
		pk.res.Dirs++
		return pk.walkDir(f, name, depth+1)
	case fi.Mode().IsRegular():
		return pk.file(f, fi, name)
	}
	pk.res.Skipped++
	return nil
}

func (pk *packer) perm(m fs.FileMode) fs.FileMode {
	if m&specialBits != 0 {
		pk.res.Stripped++
	}
	return m.Perm()
}

// file packs one regular file of the size seen on its descriptor.
func (pk *packer) file(f *os.File, fi fs.FileInfo, name string) error {
	size := fi.Size()
	if size > pk.lim.MaxEntryBytes {
		return refuse(name, KindTooLarge, ReasonEntryTooLarge, "")
	}
	if pk.res.Bytes+size > pk.lim.MaxTotalBytes {
		return refuse(name, KindTooLarge, ReasonTotalTooLarge, "")
	}
	fw, err := pk.w.file(name, pk.perm(fi.Mode()), size, fi.ModTime())
	if err != nil {
		return ioError(name, err)
	}
	n, err := io.CopyBuffer(fw, io.LimitReader(ctxReader{pk.ctx, onlyRead{f}}, size), pk.buf)
	if err != nil {
		if pk.ctx.Err() != nil {
			return &Error{Entry: name, Kind: KindCanceled, Reason: ReasonCanceled, Err: err}
		}
		return ioError(name, err)
	}
	if n != size {
		return refuse(name, KindConflict, ReasonChanged, "the file shrank while being packed")
	}
	pk.res.Files++
	pk.res.Bytes += size
	return nil
}

// onlyRead hides *os.File's WriteTo so every chunk passes ctxReader.
type onlyRead struct{ r io.Reader }

func (o onlyRead) Read(p []byte) (int, error) { return o.r.Read(p) }

// archiveWriter is one output format.
type archiveWriter interface {
	dir(name string, perm fs.FileMode, mtime time.Time) error
	file(name string, perm fs.FileMode, size int64, mtime time.Time) (io.Writer, error)
	close() error
}

func newArchiveWriter(w io.Writer, format Format) (archiveWriter, error) {
	switch format {
	case FormatZip:
		zw := zip.NewWriter(w)
		zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
			return flate.NewWriter(out, 5) // klauspost's flate: ~2x stdlib speed at similar size
		})
		return &zipWriter{zw: zw}, nil
	case FormatTar:
		return &tarWriter{tw: tar.NewWriter(w)}, nil
	case FormatTarGz:
		gz := gzip.NewWriter(w)
		return &tarWriter{tw: tar.NewWriter(gz), outer: gz}, nil
	case FormatTarZst:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, &Error{Kind: KindInternal, Reason: ReasonIO, Err: err}
		}
		return &tarWriter{tw: tar.NewWriter(zw), outer: zw}, nil
	}
	return nil, refuse("", KindInvalid, ReasonUnsupportedFormat, "cannot pack "+string(format))
}

type zipWriter struct{ zw *zip.Writer }

func (z *zipWriter) dir(name string, perm fs.FileMode, mtime time.Time) error {
	h := &zip.FileHeader{Name: name + "/", Method: zip.Store, Modified: mtime}
	h.SetMode(fs.ModeDir | perm)
	_, err := z.zw.CreateHeader(h)
	return err
}

func (z *zipWriter) file(name string, perm fs.FileMode, size int64, mtime time.Time) (io.Writer, error) {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: mtime}
	h.SetMode(perm)
	if size >= 1<<32-1 {
		h.UncompressedSize64 = uint64(size) // makes the writer emit zip64 records
	}
	return z.zw.CreateHeader(h)
}

func (z *zipWriter) close() error { return z.zw.Close() }

type tarWriter struct {
	tw    *tar.Writer
	outer io.WriteCloser
}

func (t *tarWriter) dir(name string, perm fs.FileMode, mtime time.Time) error {
	return t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(perm), ModTime: mtime})
}

func (t *tarWriter) file(name string, perm fs.FileMode, size int64, mtime time.Time) (io.Writer, error) {
	err := t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(perm), Size: size, ModTime: mtime})
	return t.tw, err
}

func (t *tarWriter) close() error {
	err := t.tw.Close()
	if t.outer != nil {
		if cerr := t.outer.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
