package archive

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/klauspost/compress/zstd"
)

var errChecksum = zip.ErrChecksum

// maxSkippedHeaders caps tar headers that create nothing (PAX global
// headers, `./` root entries) on top of MaxEntries, so a stream of them
// cannot keep the loop running forever.
const maxSkippedHeaders = 64

// zstdMaxWindow caps the decoder window (memory). zstd levels up to 19 use
// at most 8 MiB; only --long/--ultra archives need more, and they are refused.
const zstdMaxWindow = 64 << 20

// visitFunc receives each classified entry with its metered body (nil for
// directories). It must drain the body to have its bytes counted.
type visitFunc func(e entry, body io.Reader) error

// safeDetail returns a decoder's message unless it could carry a host path.
func safeDetail(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return "read error"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// walkTar reads a tar (optionally gzip or zstd compressed) stream from the
// start, classifying every header and handing each entry to visit.
func walkTar(ctx context.Context, src io.ReaderAt, size int64, format Format, b *budget, visit visitFunc) error {
	raw := &countReader{r: io.NewSectionReader(src, 0, size)}
	br := bufio.NewReaderSize(raw, 64<<10)
	// Bytes taken from the file minus those still buffered: exact for tar
	// and tar.gz (flate reads byte-wise from a ByteReader); zstd reads a
	// block ahead, which RatioFloor absorbs.
	b.consumed = func() int64 { return raw.n - int64(br.Buffered()) }
	var r io.Reader = br
	switch format {
	case FormatTarGz:
		gz, err := gzip.NewReader(r)
		if err != nil {
			return readError("", err)
		}
		defer gz.Close() //nolint:errcheck // gzip.Reader.Close only returns the last read error, which tr.Next already reported
		r = gz
	case FormatTarZst:
		zr, err := zstd.NewReader(r,
			zstd.WithDecoderConcurrency(1), // decode in this goroutine; 2 shared cores
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(zstdMaxWindow))
		if err != nil {
			return readError("", err)
		}
		defer zr.Close()
		r = zr
	}
	last := ""
	tr := tar.NewReader(&streamGuard{ctx: ctx, r: r, b: b, last: &last})
	skipped := 0
	for {
		if err := ctx.Err(); err != nil {
			return &Error{Entry: last, Kind: KindCanceled, Reason: ReasonCanceled, Err: err}
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			e := readError(last, err)
			var ae *Error
			if errors.As(e, &ae) && ae.Detail == "" {
				ae.Detail = "after this entry"
			}
			return e
		}
		last = h.Name
		e, skip, err := tarEntry(h, b.lim)
		if err != nil {
			return err
		}
		if skip {
			skipped++
			if skipped > maxSkippedHeaders {
				return refuse(h.Name, KindTooLarge, ReasonTooManyEntries, "too many headers that create nothing")
			}
			continue
		}
		var body io.Reader
		if e.kind == kindFile {
			body = &meter{ctx: ctx, r: tr, b: b, raw: e.raw, claim: e.size, csize: -1, rawStart: b.consumed()}
		}
		if err := visit(e, body); err != nil {
			return err
		}
	}
}

// tarEntry classifies a tar header: the entry type first (hardlinks,
// devices, fifos are refused whatever their names), then the name.
func tarEntry(h *tar.Header, lim Limits) (e entry, skip bool, err error) {
	e.raw = h.Name
	e.mode = h.FileInfo().Mode() & (fs.ModePerm | specialBits)
	switch h.Typeflag {
	case tar.TypeReg: // tar.Reader already turns the legacy TypeRegA into TypeReg or TypeDir
		e.kind = kindFile
		e.size = h.Size
	case tar.TypeDir:
		e.kind = kindDir
	case tar.TypeSymlink:
		if !lim.AllowSymlinks {
			return e, false, refuse(h.Name, KindForbidden, ReasonSymlink, "symlink entries are not allowed")
		}
		e.kind = kindSymlink
		e.target = h.Linkname
	case tar.TypeLink:
		return e, false, refuse(h.Name, KindForbidden, ReasonHardlink, "hardlink entries are not allowed")
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return e, false, refuse(h.Name, KindForbidden, ReasonSpecialFile, "device and fifo entries are not allowed")
	case tar.TypeXGlobalHeader:
		return e, true, nil
	default:
		return e, false, refuse(h.Name, KindForbidden, ReasonUnsupportedEntry, "unsupported tar entry type "+string(h.Typeflag))
	}
	name, ne := cleanName(h.Name, e.kind == kindDir, lim)
	if ne != nil {
		return e, false, ne
	}
	if name == "" {
		if e.kind == kindDir {
			return e, true, nil // "./": the destination itself
		}
		return e, false, refuse(h.Name, KindInvalid, ReasonEmptyName, "")
	}
	e.name = name
	return e, false, checkClaim(e, lim)
}

// checkClaim refuses a header whose claimed size alone breaks a cap, before
// any byte is decompressed.
func checkClaim(e entry, lim Limits) error {
	if e.size < 0 {
		return refuse(e.raw, KindInvalid, ReasonCorrupt, "negative size")
	}
	if e.size > lim.MaxEntryBytes {
		return refuse(e.raw, KindTooLarge, ReasonEntryTooLarge, "")
	}
	if e.size > lim.MaxTotalBytes {
		return refuse(e.raw, KindTooLarge, ReasonTotalTooLarge, "")
	}
	return nil
}

// walkZip hands every entry of an already checked zip to visit.
func walkZip(ctx context.Context, z *zip.Reader, b *budget, visit visitFunc) error {
	// len(z.File) <= MaxEntries: openZip counted the central directory first.
	for _, f := range z.File {
		if err := ctx.Err(); err != nil {
			return &Error{Entry: f.Name, Kind: KindCanceled, Reason: ReasonCanceled, Err: err}
		}
		e, err := zipEntry(f, b.lim)
		if err != nil {
			return err
		}
		if e.name == "" {
			continue // "./"
		}
		if e.kind == kindDir {
			if err := visit(e, nil); err != nil {
				return err
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return readError(f.Name, err)
		}
		m := &meter{ctx: ctx, r: rc, b: b, raw: f.Name, claim: int64(f.UncompressedSize64), csize: int64(f.CompressedSize64)} //nolint:gosec // G115: files' sizes are <= 1<<62 (zipEntry), compressed <= archive size (checkLocal); a wrapped symlink claim is negative and the meter refuses it
		if e.kind == kindSymlink {
			// The target is the body; read it (bounded) in both passes.
			t, err := io.ReadAll(io.LimitReader(m, int64(b.lim.MaxPathLen)+1))
			_ = rc.Close() // a zip entry reader: nothing to flush, the read error is the one that matters
			if err != nil {
				return err
			}
			e.target = string(t)
			if len(t) > b.lim.MaxPathLen {
				return refuse(f.Name, KindInvalid, ReasonNameTooLong, "symlink target too long")
			}
			err = visit(e, nil)
			if err != nil {
				return err
			}
			continue
		}
		err = visit(e, m)
		_ = rc.Close() // a zip entry reader: nothing to flush, the read error is the one that matters
		if err != nil {
			return err
		}
	}
	return nil
}

// zipEntry classifies a zip entry from its central directory record.
func zipEntry(f *zip.File, lim Limits) (entry, error) {
	e := entry{raw: f.Name}
	m := f.Mode()
	e.mode = m & (fs.ModePerm | specialBits)
	if f.Flags&0x1 != 0 {
		return e, refuse(f.Name, KindForbidden, ReasonEncrypted, "")
	}
	if f.Method != zip.Store && f.Method != zip.Deflate {
		return e, refuse(f.Name, KindInvalid, ReasonCompression, "only stored and deflated entries are supported")
	}
	switch {
	case m&fs.ModeSymlink != 0:
		if !lim.AllowSymlinks {
			return e, refuse(f.Name, KindForbidden, ReasonSymlink, "symlink entries are not allowed")
		}
		e.kind = kindSymlink
	case m&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0:
		return e, refuse(f.Name, KindForbidden, ReasonSpecialFile, "device, fifo and socket entries are not allowed")
	case m&fs.ModeIrregular != 0:
		return e, refuse(f.Name, KindForbidden, ReasonUnsupportedEntry, "")
	case m.IsDir():
		e.kind = kindDir
		if f.UncompressedSize64 != 0 {
			return e, refuse(f.Name, KindInvalid, ReasonCorrupt, "directory entry with content")
		}
	default:
		e.kind = kindFile
		if f.UncompressedSize64 > 1<<62 {
			return e, refuse(f.Name, KindTooLarge, ReasonEntryTooLarge, "")
		}
		e.size = int64(f.UncompressedSize64)
	}
	name, ne := cleanName(f.Name, e.kind == kindDir, lim)
	if ne != nil {
		return e, ne
	}
	if name == "" && e.kind != kindDir {
		return e, refuse(f.Name, KindInvalid, ReasonEmptyName, "")
	}
	e.name = name
	return e, checkClaim(e, lim)
}

// fileSize returns the size of a regular file to be read twice.
func fileSize(src *os.File) (int64, error) {
	fi, err := src.Stat()
	if err != nil {
		return 0, &Error{Kind: KindInternal, Reason: ReasonIO, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return 0, refuse("", KindInvalid, ReasonUnsupportedFormat, "the archive must be a regular file")
	}
	return fi.Size(), nil
}
