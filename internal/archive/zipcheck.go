package archive

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"io"
	"slices"
)

// Zip record layouts (APPNOTE.TXT 4.3).
const (
	zipLocalSig    = 0x04034b50
	zipCentralSig  = 0x02014b50
	zipEndSig      = 0x06054b50
	zipEnd64LocSig = 0x07064b50
	zipEnd64Sig    = 0x06064b50
	zipDescSig     = 0x08074b50
	zipLocalLen    = 30
	zipCentralLen  = 46
	zipEndLen      = 22
	zipEnd64LocLen = 20
	zipEnd64Len    = 56
	zip64ExtraID   = 0x0001
	zipFlagDesc    = 0x8
)

// archive/zip keeps every central record's name, extra field and comment in
// memory. These caps bound that before it parses anything: a normal record
// is ~200 bytes, so 16 KiB of extra+comment per record and 32 MiB for the
// whole directory are far above real archives and far below the sandbox's
// memory limit.
const (
	maxRecordExtra     = 16 << 10
	maxCentralDirBytes = 32 << 20
)

// zipDir is what the end-of-central-directory records say.
type zipDir struct {
	records uint64
	size    uint64
	offset  uint64
	end     int64 // offset of the (zip64) end record
}

// openZip checks a zip's structure before archive/zip is allowed to
// allocate anything per entry, then cross-checks what archive/zip parsed:
//
//  1. the end record's entry count, and then the real number of central
//     directory records (counted streaming, O(1) memory), must not exceed
//     MaxEntries: a 1,000,000-entry zip is refused after reading 10,001
//     records, whatever the end record claims;
//  2. no data before the archive (prepended data shifts every offset);
//  3. every local header must agree with its central record (name, method,
//     and crc/sizes unless deferred to a data descriptor);
//  4. the byte ranges [local header, end of data) must not overlap and must
//     lie before the central directory (overlapping-entry bombs).
func openZip(src io.ReaderAt, size int64, lim Limits) (*zip.Reader, error) {
	d, err := findZipDir(src, size)
	if err != nil {
		return nil, err
	}
	if d.records > uint64(lim.MaxEntries) { //nolint:gosec // G115: MaxEntries >= 0, Limits.validate ran in Extract
		return nil, refuse("", KindTooLarge, ReasonTooManyEntries, "the central directory claims too many entries")
	}
	// size >= 0 (a file's size); offset and size are <= size when the sum is
	// taken, and a sum that wraps negative never equals end >= 0 (refused).
	if d.offset > uint64(size) || d.size > uint64(size) || int64(d.offset+d.size) != d.end { //nolint:gosec // G115: see above
		return nil, refuse("", KindInvalid, ReasonPrependedData, "the central directory is not where the end record says")
	}
	offsets, err := walkCentral(src, size, d, lim)
	if err != nil {
		return nil, err
	}
	if uint64(len(offsets)) != d.records {
		return nil, refuse("", KindInvalid, ReasonCorrupt, "entry count disagrees with the central directory")
	}
	z, err := zip.NewReader(src, size)
	if err != nil {
		return nil, readError("", err)
	}
	if len(z.File) != len(offsets) {
		return nil, refuse("", KindInvalid, ReasonCorrupt, "entry count disagrees with the central directory")
	}
	type span struct {
		start, end int64
		name       string
	}
	spans := make([]span, 0, len(offsets))
	for i, f := range z.File {
		// A hostile zip64 offset >= 1<<63 wraps negative; checkLocal refuses off < 0.
		end, err := checkLocal(src, size, int64(offsets[i]), f) //nolint:gosec // G115: see above
		if err != nil {
			return nil, err
		}
		if end > int64(d.offset) { //nolint:gosec // G115: d.offset <= 1<<62 (findZipDir)
			return nil, refuse(f.Name, KindInvalid, ReasonOverlap, "entry data overlaps the central directory")
		}
		spans = append(spans, span{int64(offsets[i]), end, f.Name}) //nolint:gosec // G115: checkLocal accepted it, so 0 <= offset <= size
	}
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return nil, refuse(spans[i].name, KindInvalid, ReasonOverlap, "entry data overlaps another entry")
		}
	}
	return z, nil
}

// findZipDir locates the end record the same way archive/zip does (last
// 1 KiB, then last 65 KiB; zip64 locator just before it), so both agree on
// where the central directory is.
func findZipDir(r io.ReaderAt, size int64) (zipDir, error) {
	var d zipDir
	var buf []byte
	for i, n := range []int64{1024, 65 * 1024} {
		if n > size {
			n = size
		}
		buf = make([]byte, n)
		if _, err := r.ReadAt(buf, size-n); err != nil && err != io.EOF {
			return d, readError("", err)
		}
		if p := findEndSig(buf); p >= 0 {
			buf = buf[p:]
			d.end = size - n + int64(p)
			break
		}
		if i == 1 || n == size {
			return d, refuse("", KindInvalid, ReasonCorrupt, "no end of central directory record")
		}
	}
	le := binary.LittleEndian
	d.records = uint64(le.Uint16(buf[10:]))
	d.size = uint64(le.Uint32(buf[12:]))
	d.offset = uint64(le.Uint32(buf[16:]))
	if d.records == 0xffff || d.size == 0xffff || d.offset == 0xffffffff {
		loc := d.end - zipEnd64LocLen
		if loc >= 0 {
			var lb [zipEnd64LocLen]byte
			if _, err := r.ReadAt(lb[:], loc); err != nil {
				return d, readError("", err)
			}
			if le.Uint32(lb[0:]) == zipEnd64LocSig && le.Uint32(lb[4:]) == 0 && le.Uint32(lb[16:]) == 1 {
				p := le.Uint64(lb[8:])
				var eb [zipEnd64Len]byte
				if p > uint64(size) { //nolint:gosec // G115: size >= 0, a file's size
					return d, refuse("", KindInvalid, ReasonCorrupt, "bad zip64 end record offset")
				}
				if _, err := r.ReadAt(eb[:], int64(p)); err != nil || le.Uint32(eb[0:]) != zipEnd64Sig { //nolint:gosec // G115: p <= size, checked above
					return d, refuse("", KindInvalid, ReasonCorrupt, "bad zip64 end record")
				}
				d.end = int64(p) //nolint:gosec // G115: p <= size, checked above
				d.records = le.Uint64(eb[32:])
				d.size = le.Uint64(eb[40:])
				d.offset = le.Uint64(eb[48:])
			}
		}
	}
	if d.size > 1<<62 || d.offset > 1<<62 {
		return d, refuse("", KindInvalid, ReasonCorrupt, "central directory out of range")
	}
	return d, nil
}

func findEndSig(b []byte) int {
	for i := len(b) - zipEndLen; i >= 0; i-- {
		if b[i] == 'P' && b[i+1] == 'K' && b[i+2] == 0x05 && b[i+3] == 0x06 {
			n := int(b[i+zipEndLen-2]) | int(b[i+zipEndLen-1])<<8
			if n+zipEndLen+i > len(b) {
				return -1
			}
			return i
		}
	}
	return -1
}

// walkCentral counts central directory records streaming and returns each
// record's local header offset. It stops where archive/zip stops (the first
// non-record) and refuses the MaxEntries+1st record before storing it.
func walkCentral(r io.ReaderAt, size int64, d zipDir, lim Limits) ([]uint64, error) {
	// openZip checked d.offset <= size before calling.
	br := bufio.NewReaderSize(io.NewSectionReader(r, int64(d.offset), size-int64(d.offset)), 64<<10) //nolint:gosec // G115: see above
	le := binary.LittleEndian
	var offsets []uint64
	var hdr [zipCentralLen]byte
	var extra []byte
	var walked int64
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil || le.Uint32(hdr[0:]) != zipCentralSig {
			return offsets, nil
		}
		if len(offsets) >= lim.MaxEntries {
			return nil, refuse("", KindTooLarge, ReasonTooManyEntries, "the central directory holds too many entries")
		}
		csize := le.Uint32(hdr[20:])
		usize := le.Uint32(hdr[24:])
		nameLen := int64(le.Uint16(hdr[28:]))
		extraLen := int(le.Uint16(hdr[30:]))
		commentLen := int64(le.Uint16(hdr[32:]))
		off := uint64(le.Uint32(hdr[42:]))
		if nameLen > int64(lim.MaxPathLen) {
			return nil, refuse("", KindInvalid, ReasonNameTooLong, "a central directory name is too long")
		}
		if int64(extraLen)+commentLen > maxRecordExtra {
			return nil, refuse("", KindTooLarge, ReasonCorrupt, "a central directory record is oversized")
		}
		walked += zipCentralLen + nameLen + int64(extraLen) + commentLen
		if walked > maxCentralDirBytes {
			return nil, refuse("", KindTooLarge, ReasonCorrupt, "the central directory is oversized")
		}
		if _, err := br.Discard(int(nameLen)); err != nil {
			return offsets, nil
		}
		extra = slices.Grow(extra[:0], extraLen)[:extraLen]
		if _, err := io.ReadFull(br, extra); err != nil {
			return offsets, nil
		}
		if off == 0xffffffff {
			off = zip64Offset(extra, usize == 0xffffffff, csize == 0xffffffff)
		}
		if _, err := br.Discard(int(commentLen)); err != nil {
			return offsets, nil
		}
		offsets = append(offsets, off)
	}
}

// zip64Offset reads the local header offset from a zip64 extra field, where
// it follows the uncompressed and compressed sizes that are present.
func zip64Offset(extra []byte, hasU, hasC bool) uint64 {
	le := binary.LittleEndian
	// Bounded by len(extra) <= 65535 and 4 bytes consumed per step at least.
	for len(extra) >= 4 {
		id := le.Uint16(extra[0:])
		n := int(le.Uint16(extra[2:]))
		extra = extra[4:]
		if n > len(extra) {
			break
		}
		if id == zip64ExtraID {
			f := extra[:n]
			if hasU {
				if len(f) < 8 {
					break
				}
				f = f[8:]
			}
			if hasC {
				if len(f) < 8 {
					break
				}
				f = f[8:]
			}
			if len(f) >= 8 {
				return le.Uint64(f)
			}
			break
		}
		extra = extra[n:]
	}
	return 0xffffffff
}

// checkLocal compares a local header with its central record and returns
// where the entry's bytes end (data plus data descriptor).
func checkLocal(r io.ReaderAt, size, off int64, f *zip.File) (int64, error) {
	le := binary.LittleEndian
	var h [zipLocalLen]byte
	if off < 0 || off+zipLocalLen > size {
		return 0, refuse(f.Name, KindInvalid, ReasonHeaderMismatch, "local header out of range")
	}
	if _, err := r.ReadAt(h[:], off); err != nil {
		return 0, readError(f.Name, err)
	}
	if le.Uint32(h[0:]) != zipLocalSig {
		return 0, refuse(f.Name, KindInvalid, ReasonHeaderMismatch, "no local header where the central directory points")
	}
	flags := le.Uint16(h[6:])
	method := le.Uint16(h[8:])
	crc := le.Uint32(h[14:])
	csize := le.Uint32(h[18:])
	usize := le.Uint32(h[22:])
	nameLen := int64(le.Uint16(h[26:]))
	extraLen := int64(le.Uint16(h[28:]))
	if nameLen != int64(len(f.Name)) || off+zipLocalLen+nameLen > size {
		return 0, refuse(f.Name, KindInvalid, ReasonHeaderMismatch, "local name differs from the central directory")
	}
	name := make([]byte, nameLen)
	if _, err := r.ReadAt(name, off+zipLocalLen); err != nil {
		return 0, readError(f.Name, err)
	}
	if string(name) != f.Name {
		return 0, refuse(f.Name, KindInvalid, ReasonHeaderMismatch, "local name differs from the central directory")
	}
	if method != f.Method || (flags&zipFlagDesc) != (f.Flags&zipFlagDesc) {
		return 0, refuse(f.Name, KindInvalid, ReasonHeaderMismatch, "local method or flags differ from the central directory")
	}
	if flags&zipFlagDesc == 0 {
		if crc != f.CRC32 ||
			(csize != 0xffffffff && uint64(csize) != f.CompressedSize64) ||
			(usize != 0xffffffff && uint64(usize) != f.UncompressedSize64) {
			return 0, refuse(f.Name, KindInvalid, ReasonHeaderMismatch, "local crc or sizes differ from the central directory")
		}
	}
	end := off + zipLocalLen + nameLen + extraLen
	if f.CompressedSize64 > uint64(size) || end+int64(f.CompressedSize64) > size { //nolint:gosec // G115: size >= 0; the sum is taken only once CompressedSize64 <= size
		return 0, refuse(f.Name, KindInvalid, ReasonCorrupt, "entry data out of range")
	}
	end += int64(f.CompressedSize64) //nolint:gosec // G115: <= size, checked above
	if flags&zipFlagDesc != 0 {
		n := int64(12)
		if f.CompressedSize64 >= 0xffffffff || f.UncompressedSize64 >= 0xffffffff {
			n = 20
		}
		var sig [4]byte
		if _, err := r.ReadAt(sig[:], end); err == nil && le.Uint32(sig[:]) == zipDescSig {
			n += 4
		}
		end += n
	}
	return end, nil
}
