package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// patchCentral sets a uint32 field of the n-th central directory record.
func patchCentral(t testing.TB, b []byte, n, field int, v uint32) []byte {
	t.Helper()
	b = bytes.Clone(b)
	idx := -1
	for i := 0; i <= n; i++ {
		j := bytes.Index(b[idx+1:], []byte("PK\x01\x02"))
		if j < 0 {
			t.Fatalf("central record %d not found", n)
		}
		idx += 1 + j
	}
	binary.LittleEndian.PutUint32(b[idx+field:], v)
	return b
}

// patchTarSize rewrites the size field of the first tar header and fixes
// its checksum, so the header is valid but lies.
func patchTarSize(t testing.TB, b []byte, size int64) []byte {
	t.Helper()
	b = bytes.Clone(b)
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b[:512] {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zst(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// overlappingZip builds the overlapping-entry bomb shape: entry "b"'s
// central record points INTO entry "a"'s data, where a valid local header
// for "b" is hidden, so the two data ranges overlap.
func overlappingZip(t testing.TB) []byte {
	t.Helper()
	var inner bytes.Buffer
	iw := zip.NewWriter(&inner)
	rawZipEntry(t, iw, "b", "hello")
	must(t, iw.Flush())
	hidden := inner.Bytes()[:30+1+5] // local header + name + data of "b"

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	rawZipEntry(t, zw, "a", string(hidden)+"tail")
	rawZipEntry(t, zw, "b", "hello")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	off, err := z.File[0].DataOffset()
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 || off > math.MaxUint32 {
		t.Fatalf("data offset %d does not fit a zip32 field", off)
		return nil
	}
	return patchCentral(t, b, 1, 42, uint32(off))
}

// zip64ClaimZip is a tiny zip whose zip64 end record claims 1,000,000 entries.
func zip64ClaimZip() []byte {
	le := binary.LittleEndian
	b := make([]byte, 30) // an empty local header, so Detect says zip
	le.PutUint32(b, zipLocalSig)
	end64 := make([]byte, zipEnd64Len)
	le.PutUint32(end64[0:], zipEnd64Sig)
	le.PutUint64(end64[4:], zipEnd64Len-12)
	le.PutUint64(end64[24:], 1_000_000)
	le.PutUint64(end64[32:], 1_000_000)
	le.PutUint64(end64[48:], 30)
	b = append(b, end64...)
	loc := make([]byte, zipEnd64LocLen)
	le.PutUint32(loc[0:], zipEnd64LocSig)
	le.PutUint64(loc[8:], 30)
	le.PutUint32(loc[16:], 1)
	b = append(b, loc...)
	end := make([]byte, zipEndLen)
	le.PutUint32(end[0:], zipEndSig)
	le.PutUint16(end[8:], 0xffff)
	le.PutUint16(end[10:], 0xffff)
	le.PutUint32(end[16:], 0xffffffff)
	return append(b, end...)
}

// manyZip has n empty entries; if claim >= 0 the end record lies about the count.
func manyZip(t testing.TB, n int, claim int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range n {
		h := &zip.FileHeader{Name: "f" + strconv.Itoa(i), Method: zip.Store}
		if _, err := zw.CreateHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if claim >= 0 {
		if claim > math.MaxUint16 {
			t.Fatalf("claim %d does not fit the end record", claim)
			return nil
		}
		end := len(b) - zipEndLen
		binary.LittleEndian.PutUint16(b[end+8:], uint16(claim))
		binary.LittleEndian.PutUint16(b[end+10:], uint16(claim))
	}
	return b
}

// zerosZip streams n zero bytes through deflate without holding them.
func zerosZip(t testing.TB, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("zeros")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(w, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zerosTar is a tar with one n-byte file of zeros, built streaming.
func zerosTar(t testing.TB, n int64, wrap func(io.Writer) io.WriteCloser) []byte {
	t.Helper()
	var buf bytes.Buffer
	out := wrap(&buf)
	tw := tar.NewWriter(out)
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Size: n, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(tw, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
	must(t, tw.Close())
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func gzipW(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) }
func zstdW(w io.Writer) io.WriteCloser {
	z, _ := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
	return z
}

func TestExtractRefusesHostileArchives(t *testing.T) {
	big := strings.Repeat("x", 1000)
	small := func(f func(*Limits)) Limits { l := DefaultLimits(); f(&l); return l }
	cases := []struct {
		name   string
		data   func(t testing.TB) []byte
		format Format
		lim    Limits
		reason string
	}{
		{"zip-slip", func(t testing.TB) []byte { return buildZip(t, zent{name: "ok.txt"}, zent{name: "../x"}) }, FormatZip, DefaultLimits(), ReasonParentComponent},
		{"zip-slip-nested", func(t testing.TB) []byte { return buildZip(t, zent{name: "a/b/../../../x"}) }, FormatZip, DefaultLimits(), ReasonParentComponent},
		{"tar-slip", func(t testing.TB) []byte { return buildTar(t, tent{name: "ok"}, tent{name: "../x"}) }, FormatTar, DefaultLimits(), ReasonParentComponent},
		{"absolute", func(t testing.TB) []byte { return buildZip(t, zent{name: "/etc/x"}) }, FormatZip, DefaultLimits(), ReasonAbsolute},
		{"tar-absolute", func(t testing.TB) []byte { return buildTar(t, tent{name: "/etc/x"}) }, FormatTar, DefaultLimits(), ReasonAbsolute},
		{"backslash", func(t testing.TB) []byte { return buildZip(t, zent{name: `..\x`}) }, FormatZip, DefaultLimits(), ReasonBackslash},
		{"drive-letter", func(t testing.TB) []byte { return buildZip(t, zent{name: "C:/x"}) }, FormatZip, DefaultLimits(), ReasonDriveLetter},
		{"drive-letter-relative", func(t testing.TB) []byte { return buildTar(t, tent{name: "c:x"}) }, FormatTar, DefaultLimits(), ReasonDriveLetter},
		{"nul-in-name", func(t testing.TB) []byte { return buildZip(t, zent{name: "a\x00b"}) }, FormatZip, DefaultLimits(), ReasonControlChar},
		{"newline-in-name", func(t testing.TB) []byte { return buildZip(t, zent{name: "a\nb"}) }, FormatZip, DefaultLimits(), ReasonControlChar},
		{"invalid-utf8", func(t testing.TB) []byte { return buildZip(t, zent{name: "a\xffb"}) }, FormatZip, DefaultLimits(), ReasonInvalidUTF8},
		{"empty-name", func(t testing.TB) []byte { return buildTar(t, tent{name: "."}) }, FormatTar, DefaultLimits(), ReasonEmptyName},
		{"too-deep", func(t testing.TB) []byte { return buildTar(t, tent{name: strings.Repeat("d/", 40) + "f"}) }, FormatTar, DefaultLimits(), ReasonTooDeep},
		{"name-too-long", func(t testing.TB) []byte { return buildTar(t, tent{name: strings.Repeat("n", 2000)}) }, FormatTar, DefaultLimits(), ReasonNameTooLong},
		{"component-too-long", func(t testing.TB) []byte { return buildTar(t, tent{name: strings.Repeat("n", 300)}) }, FormatTar, DefaultLimits(), ReasonNameTooLong},
		{"reserved-staging-name", func(t testing.TB) []byte { return buildTar(t, tent{name: stagingPrefix + "x/f"}) }, FormatTar, DefaultLimits(), ReasonReservedName},
		{"symlink-refused-by-default", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "a", typ: tar.TypeSymlink, link: "/etc"}, tent{name: "a/passwd", body: "root::0:0"})
		}, FormatTar, DefaultLimits(), ReasonSymlink},
		{"zip-symlink-refused-by-default", func(t testing.TB) []byte {
			return buildZip(t, zent{name: "a", body: "/etc", mode: fs.ModeSymlink | 0o777})
		}, FormatZip, DefaultLimits(), ReasonSymlink},
		{"symlink-abs-then-write-through", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "a", typ: tar.TypeSymlink, link: "/etc"}, tent{name: "a/passwd", body: "root::0:0"})
		}, FormatTar, withSymlinks(), ReasonWriteThrough},
		{"symlink-dotdot-then-write-through", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "a", typ: tar.TypeSymlink, link: ".."}, tent{name: "a/x", body: "x"})
		}, FormatTar, withSymlinks(), ReasonWriteThrough},
		{"zip-symlink-then-write-through", func(t testing.TB) []byte {
			return buildZip(t, zent{name: "a", body: "sub", mode: fs.ModeSymlink | 0o777}, zent{name: "sub/"}, zent{name: "a/x", body: "x"})
		}, FormatZip, withSymlinks(), ReasonWriteThrough},
		{"write-through-inside-symlink", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "sub/", typ: tar.TypeDir}, tent{name: "a", typ: tar.TypeSymlink, link: "sub"}, tent{name: "a/x", body: "x"})
		}, FormatTar, withSymlinks(), ReasonWriteThrough},
		{"symlink-replaces-dir", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "a/x", body: "x"}, tent{name: "a", typ: tar.TypeSymlink, link: "/etc"})
		}, FormatTar, withSymlinks(), ReasonWriteThrough},
		{"symlink-absolute", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "a", typ: tar.TypeSymlink, link: "/etc/shadow"})
		}, FormatTar, withSymlinks(), ReasonSymlinkOutside},
		{"symlink-dotdot", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "d/a", typ: tar.TypeSymlink, link: "../../x"})
		}, FormatTar, withSymlinks(), ReasonSymlinkOutside},
		{"symlink-chain-escape", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "d/", typ: tar.TypeDir}, tent{name: "d/l", typ: tar.TypeSymlink, link: ".."},
				tent{name: "m", typ: tar.TypeSymlink, link: "d/l/.."})
		}, FormatTar, withSymlinks(), ReasonSymlinkOutside},
		{"symlink-through-unknown-name", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "m", typ: tar.TypeSymlink, link: "elsewhere/x"})
		}, FormatTar, withSymlinks(), ReasonSymlinkOutside},
		{"hardlink-out", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"})
		}, FormatTar, DefaultLimits(), ReasonHardlink},
		{"hardlink-inside", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "f", body: "x"}, tent{name: "h", typ: tar.TypeLink, link: "f"})
		}, FormatTar, withSymlinks(), ReasonHardlink},
		{"char-device", func(t testing.TB) []byte { return buildTar(t, tent{name: "null", typ: tar.TypeChar}) }, FormatTar, DefaultLimits(), ReasonSpecialFile},
		{"block-device", func(t testing.TB) []byte { return buildTar(t, tent{name: "sda", typ: tar.TypeBlock}) }, FormatTar, DefaultLimits(), ReasonSpecialFile},
		{"fifo", func(t testing.TB) []byte { return buildTar(t, tent{name: "ok"}, tent{name: "p", typ: tar.TypeFifo}) }, FormatTar, DefaultLimits(), ReasonSpecialFile},
		{"zip-fifo", func(t testing.TB) []byte { return buildZip(t, zent{name: "p", mode: fs.ModeNamedPipe | 0o644}) }, FormatZip, DefaultLimits(), ReasonSpecialFile},
		{"zip-device", func(t testing.TB) []byte {
			return buildZip(t, zent{name: "d", mode: fs.ModeDevice | fs.ModeCharDevice | 0o644})
		}, FormatZip, DefaultLimits(), ReasonSpecialFile},
		{"zip-socket", func(t testing.TB) []byte { return buildZip(t, zent{name: "s", mode: fs.ModeSocket | 0o644}) }, FormatZip, DefaultLimits(), ReasonSpecialFile},
		{"duplicate-zip", func(t testing.TB) []byte {
			return buildZip(t, zent{name: "a.txt", body: "1"}, zent{name: "a.txt", body: "2"})
		}, FormatZip, DefaultLimits(), ReasonDuplicate},
		{"duplicate-after-cleaning", func(t testing.TB) []byte { return buildTar(t, tent{name: "a/b"}, tent{name: "./a//b"}) }, FormatTar, DefaultLimits(), ReasonDuplicate},
		{"duplicate-dir", func(t testing.TB) []byte {
			return buildTar(t, tent{name: "d/", typ: tar.TypeDir}, tent{name: "d/", typ: tar.TypeDir})
		}, FormatTar, DefaultLimits(), ReasonDuplicate},
		{"case-collision", func(t testing.TB) []byte { return buildZip(t, zent{name: "A.txt"}, zent{name: "a.txt"}) }, FormatZip, DefaultLimits(), ReasonCaseCollision},
		{"case-collision-dirs", func(t testing.TB) []byte { return buildTar(t, tent{name: "Dir/x"}, tent{name: "dir/y"}) }, FormatTar, DefaultLimits(), ReasonCaseCollision},
		{"case-collision-kelvin", func(t testing.TB) []byte { return buildTar(t, tent{name: "k"}, tent{name: "\u212a"}) }, FormatTar, DefaultLimits(), ReasonCaseCollision},
		{"file-as-parent", func(t testing.TB) []byte { return buildTar(t, tent{name: "a", body: "x"}, tent{name: "a/b"}) }, FormatTar, DefaultLimits(), ReasonPathConflict},
		{"empty-zip", func(t testing.TB) []byte { return buildZip(t) }, FormatZip, DefaultLimits(), ReasonEmptyArchive},
		{"empty-tar", func(t testing.TB) []byte { return buildTar(t) }, FormatTar, DefaultLimits(), ReasonEmptyArchive},
		{"only-root-entry", func(t testing.TB) []byte { return buildTar(t, tent{name: "./", typ: tar.TypeDir}) }, FormatTar, DefaultLimits(), ReasonEmptyArchive},
		{"zero-bytes", func(t testing.TB) []byte { return nil }, FormatTar, DefaultLimits(), ReasonEmptyArchive},
		{"format-mismatch", func(t testing.TB) []byte { return buildZip(t, zent{name: "a"}) }, FormatTarGz, DefaultLimits(), ReasonFormatMismatch},
		{"garbage", func(t testing.TB) []byte { return []byte(strings.Repeat("garbage!", 100)) }, FormatTar, DefaultLimits(), ReasonUnsupportedFormat},
		{"entry-too-large-claim", func(t testing.TB) []byte { return buildTar(t, tent{name: "a", body: big}) },
			FormatTar, small(func(l *Limits) { l.MaxEntryBytes = 999 }), ReasonEntryTooLarge},
		{"total-too-large", func(t testing.TB) []byte { return buildTar(t, tent{name: "a", body: big}, tent{name: "b", body: big}) },
			FormatTar, small(func(l *Limits) { l.MaxTotalBytes = 1500 }), ReasonTotalTooLarge},
		{"zip-total-too-large", func(t testing.TB) []byte { return buildZip(t, zent{name: "a", body: big}, zent{name: "b", body: big}) },
			FormatZip, small(func(l *Limits) { l.MaxTotalBytes = 1500 }), ReasonTotalTooLarge},
		{"too-many-entries", func(t testing.TB) []byte { return buildTar(t, tent{name: "a"}, tent{name: "b"}, tent{name: "c"}) },
			FormatTar, small(func(l *Limits) { l.MaxEntries = 2 }), ReasonTooManyEntries},
		{"implied-dirs-count", func(t testing.TB) []byte { return buildTar(t, tent{name: "a/b/c/d"}) },
			FormatTar, small(func(l *Limits) { l.MaxEntries = 2 }), ReasonTooManyEntries},
		{"zero-limits-fail-closed", func(t testing.TB) []byte { return buildTar(t, tent{name: "a"}) }, FormatTar, Limits{}, ReasonRatio},
		{"negative-limits", func(t testing.TB) []byte { return buildTar(t, tent{name: "a"}) }, FormatTar, small(func(l *Limits) { l.MaxRatio = -1 }), ReasonInvalidLimits},
		{"ratio-bomb-zip", func(t testing.TB) []byte { return zerosZip(t, 64<<20) }, FormatZip, DefaultLimits(), ReasonRatio},
		{"ratio-bomb-tar-gz", func(t testing.TB) []byte { return zerosTar(t, 64<<20, gzipW) }, FormatTarGz, DefaultLimits(), ReasonRatio},
		{"ratio-bomb-tar-zst", func(t testing.TB) []byte { return zerosTar(t, 64<<20, zstdW) }, FormatTarZst, DefaultLimits(), ReasonRatio},
		{"ratio-small-cap", func(t testing.TB) []byte { return zerosZip(t, 1<<20) },
			FormatZip, small(func(l *Limits) { l.MaxRatio = 10; l.RatioFloor = 0 }), ReasonRatio},
		{"lying-tar-size", func(t testing.TB) []byte { return patchTarSize(t, buildTar(t, tent{name: "a", body: "hello"}), 10000) }, FormatTar, DefaultLimits(), ReasonSizeMismatch},
		{"lying-tar-gz-size", func(t testing.TB) []byte {
			return gz(t, patchTarSize(t, buildTar(t, tent{name: "a", body: "hello"}), 10000))
		}, FormatTarGz, DefaultLimits(), ReasonSizeMismatch},
		{"lying-zip-size-smaller", func(t testing.TB) []byte { return patchCentral(t, buildZip(t, zent{name: "a", body: big}), 0, 24, 10) }, FormatZip, DefaultLimits(), ReasonSizeMismatch},
		{"lying-zip-size-larger", func(t testing.TB) []byte {
			return patchCentral(t, buildZip(t, zent{name: "a", body: big}), 0, 24, 5000)
		}, FormatZip, DefaultLimits(), ReasonSizeMismatch},
		{"zip-bad-crc", func(t testing.TB) []byte { return patchCentral(t, buildZip(t, zent{name: "a", body: big}), 0, 16, 1) }, FormatZip, DefaultLimits(), ReasonChecksum},
		{"overlapping-zip-entries", overlappingZip, FormatZip, DefaultLimits(), ReasonOverlap},
		{"local-header-name-mismatch", func(t testing.TB) []byte {
			b := buildZip(t, zent{name: "abc", body: "x"})
			b[30+2] = 'd' // the local name says "abd", the central directory "abc"
			return b
		}, FormatZip, DefaultLimits(), ReasonHeaderMismatch},
		{"local-header-size-mismatch", func(t testing.TB) []byte {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			rawZipEntry(t, zw, "a", "hello")
			must(t, zw.Close())
			b := buf.Bytes()
			binary.LittleEndian.PutUint32(b[22:], 4) // local usize 4, central 5
			return b
		}, FormatZip, DefaultLimits(), ReasonHeaderMismatch},
		{"encrypted-zip", func(t testing.TB) []byte {
			b := patchCentral(t, buildZip(t, zent{name: "a", body: "x"}), 0, 8, 0x9|uint32(zip.Deflate)<<16)
			b[6] |= 1
			return b
		}, FormatZip, DefaultLimits(), ReasonEncrypted},
		{"zip-many-entries-honest", func(t testing.TB) []byte { return manyZip(t, 10_001, -1) }, FormatZip, DefaultLimits(), ReasonTooManyEntries},
		{"zip-many-entries-lying-count", func(t testing.TB) []byte { return manyZip(t, 20_000, 16) }, FormatZip, DefaultLimits(), ReasonTooManyEntries},
		{"zip64-claims-million", func(t testing.TB) []byte { return zip64ClaimZip() }, FormatZip, DefaultLimits(), ReasonTooManyEntries},
		{"pax-header-bomb", paxBomb, FormatTarGz, DefaultLimits(), ReasonRatio},
		{"zip-central-name-too-long", func(t testing.TB) []byte { return buildZip(t, zent{name: strings.Repeat("n", 2000)}) },
			FormatZip, DefaultLimits(), ReasonNameTooLong},
		{"zip-oversized-central-record", func(t testing.TB) []byte {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			h := &zip.FileHeader{Name: "a", Comment: strings.Repeat("c", 20_000)}
			_, err := zw.CreateHeader(h)
			must(t, err)
			must(t, zw.Close())
			return buf.Bytes()
		}, FormatZip, DefaultLimits(), ReasonCorrupt},
		{"prepended-data", func(t testing.TB) []byte {
			return append([]byte("PK\x03\x04 junk in front of the archive"), buildZip(t, zent{name: "a"})...)
		}, FormatZip, DefaultLimits(), ReasonPrependedData},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDest(t)
			res, err := d.extract(t, tc.data(t), tc.format, tc.lim)
			if err == nil {
				t.Fatalf("extraction succeeded: %+v", res)
			}
			ae := wantReason(t, err, tc.reason)
			if strings.Contains(ae.Error(), d.base) {
				t.Fatalf("message leaks a host path: %v", ae)
			}
			d.assertUntouched(t)
		})
	}
}

func TestExtractConflictWithExistingTarget(t *testing.T) {
	d := newDest(t)
	if err := os.WriteFile(filepath.Join(d.base, "dst", "b.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := d.extract(t, buildTar(t, tent{name: "a.txt", body: "new"}, tent{name: "b.txt", body: "theirs"}), FormatTar, DefaultLimits())
	ae := wantReason(t, err, ReasonTargetExists)
	if ae.Kind != KindConflict || ae.Entry != "b.txt" {
		t.Fatalf("error = %+v", ae)
	}
	got := d.tree(t)
	if strings.Join(got, ",") != "dst/,dst/b.txt,sentinel" {
		t.Fatalf("tree = %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(d.base, "dst", "b.txt")); string(b) != "mine" {
		t.Fatalf("existing file overwritten: %q", b)
	}
}

// TestExtractMoveRollsBack makes the no-replace rename fail half way (a
// name the pre-check could not see, created while staging) and checks that
// the moved entries are moved back.
func TestExtractMoveRollsBack(t *testing.T) {
	d := newDest(t)
	data := buildTar(t, tent{name: "a.txt", body: "a"}, tent{name: "z.txt", body: "z"})
	ctx := &hookCtx{Context: context.Background()}
	ctx.hook = func(n int) {
		// The last context check happens after staging: plant z.txt then.
		if n == ctx.last {
			// t.Error, not Fatal: this runs inside Extract.
			if err := os.WriteFile(filepath.Join(d.base, "dst", "z.txt"), []byte("racer"), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	// Measure how many checks one extraction makes.
	probe := newDest(t)
	if _, err := Extract(ctx, archiveFile(t, data), FormatTar, probe.root, "dst", DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	ctx.last, ctx.n = ctx.n, 0
	_, err := Extract(ctx, archiveFile(t, data), FormatTar, d.root, "dst", DefaultLimits())
	_ = wantReason(t, err, ReasonTargetExists)
	if got := strings.Join(d.tree(t), ","); got != "dst/,dst/z.txt,sentinel" {
		t.Fatalf("tree = %q", got)
	}
}

// hookCtx counts Err calls and can cancel after a number of them, which
// lets a test stop an extraction at a precise point without timing.
type hookCtx struct {
	context.Context
	n, last  int
	cancelAt int
	hook     func(n int)
}

func (c *hookCtx) Err() error {
	c.n++
	if c.hook != nil {
		c.hook(c.n)
	}
	if c.cancelAt > 0 && c.n >= c.cancelAt {
		return context.Canceled
	}
	return nil
}

func TestExtractCancel(t *testing.T) {
	var ents []tent
	for i := range 20 {
		ents = append(ents, tent{name: fmt.Sprintf("d%d/f%d", i%3, i), body: noise(i, 300_000)})
	}
	data := gz(t, buildTar(t, ents...))
	probe := &hookCtx{Context: context.Background()}
	if _, err := Extract(probe, archiveFile(t, data), FormatTarGz, newDest(t).root, "dst", DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	total := probe.n
	// Cancel at several points: in pass one, early and late in pass two.
	for _, at := range []int{1, total / 4, total/2 + 2, total - 3, total} {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			d := newDest(t)
			ctx := &hookCtx{Context: context.Background(), cancelAt: at}
			_, err := Extract(ctx, archiveFile(t, data), FormatTarGz, d.root, "dst", DefaultLimits())
			ae := wantReason(t, err, ReasonCanceled)
			if ae.Kind != KindCanceled || !errorsIsCanceled(err) {
				t.Fatalf("error = %+v", ae)
			}
			d.assertUntouched(t)
		})
	}
}

func errorsIsCanceled(err error) bool {
	return errors.Is(err, context.Canceled)
}

// TestExtractSourceChangedBetweenPasses rewrites the archive file after
// pass one (from the context hook): pass two must notice and leave nothing.
func TestExtractSourceChangedBetweenPasses(t *testing.T) {
	orig := buildTar(t, tent{name: "a.txt", body: "aaaa"}, tent{name: "b.txt", body: "bbbb"})
	evil := buildTar(t, tent{name: "a.txt", body: "aaaa"}, tent{name: "c.txt", body: "bbbb"})
	probe := &hookCtx{Context: context.Background()}
	if _, err := Extract(probe, archiveFile(t, orig), FormatTar, newDest(t).root, "dst", DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	d := newDest(t)
	src := archiveFile(t, orig)
	ctx := &hookCtx{Context: context.Background()}
	ctx.hook = func(n int) {
		if n == probe.n/2+1 { // the first check of pass two
			// t.Error, not Fatal: this runs inside Extract.
			if err := os.WriteFile(src.Name(), evil, 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	_, err := Extract(ctx, src, FormatTar, d.root, "dst", DefaultLimits())
	_ = wantReason(t, err, ReasonSourceChanged)
	d.assertUntouched(t)
}

func TestExtractCreatesAndRemovesMissingDir(t *testing.T) {
	d := newDest(t)
	_, err := Extract(context.Background(), archiveFile(t, buildTar(t, tent{name: "../x"})), FormatTar, d.root, "dst/new/deeper", DefaultLimits())
	_ = wantReason(t, err, ReasonParentComponent)
	d.assertUntouched(t)

	res, err := Extract(context.Background(), archiveFile(t, buildTar(t, tent{name: "a", body: "1"})), FormatTar, d.root, "dst/new/deeper", DefaultLimits())
	if err != nil || res.Files != 1 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(d.base, "dst/new/deeper/a")); err != nil || string(b) != "1" {
		t.Fatalf("read %q %v", b, err)
	}
}

func TestExtractDestinationEscape(t *testing.T) {
	d := newDest(t)
	if err := os.Symlink("/tmp", filepath.Join(d.base, "dst", "out")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"../x", "/etc", "dst/out"} {
		_, err := Extract(context.Background(), archiveFile(t, buildTar(t, tent{name: "a"})), FormatTar, d.root, dir, DefaultLimits())
		if err == nil {
			t.Fatalf("extraction into %q succeeded", dir)
		}
		if strings.Contains(err.Error(), d.base) {
			t.Fatalf("message leaks a host path: %v", err)
		}
	}
}

func TestDetect(t *testing.T) {
	tarb := buildTar(t, tent{name: "a", body: "x"})
	v7 := bytes.Clone(tarb)
	copy(v7[257:265], make([]byte, 8)) // drop the ustar magic, keep a valid checksum
	copy(v7[148:156], "        ")
	var sum int64
	for _, c := range v7[:512] {
		sum += int64(c)
	}
	copy(v7[148:156], fmt.Sprintf("%06o\x00 ", sum))
	cases := []struct {
		name string
		data []byte
		want Format
	}{
		{"zip", buildZip(t, zent{name: "a"}), FormatZip},
		{"empty-zip", buildZip(t), FormatZip},
		{"tar", tarb, FormatTar},
		{"v7-tar", v7, FormatTar},
		{"tar.gz", gz(t, tarb), FormatTarGz},
		{"tar.zst", zst(t, tarb), FormatTarZst},
		{"text", []byte("hello world"), ""},
		{"empty", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(bytes.NewReader(tc.data), int64(len(tc.data)))
			if got != tc.want || (tc.want == "") != (err != nil) {
				t.Fatalf("Detect = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// noise is incompressible test content.
func noise(seed, n int) string {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}) //nolint:gosec // G115: the low 16 bits of seed are the seed, truncation intended
	b := make([]byte, n)
	_, _ = r.Read(b) // ChaCha8.Read always fills b and returns nil
	return string(b)
}

// paxBomb hides 50 MB in PAX records, which archive/tar consumes inside
// Next without any entry content: only the stream guard sees those bytes.
func paxBomb(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	comment := strings.Repeat("a", 1_000_000)
	for i := range 50 {
		h := &tar.Header{Name: "f" + strconv.Itoa(i), Typeflag: tar.TypeReg, Mode: 0o644,
			PAXRecords: map[string]string{"comment": comment}, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	must(t, tw.Close())
	must(t, zw.Close())
	return buf.Bytes()
}
