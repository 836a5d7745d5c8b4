package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// zent is one zip entry to build: mode 0 means 0644 file (or 0755 dir if
// the name ends in "/").
type zent struct {
	name string
	body string
	mode fs.FileMode
}

func buildZip(t testing.TB, ents ...zent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: time.Unix(1_700_000_000, 0)}
		m := e.mode
		if m == 0 {
			m = 0o644
		}
		h.SetMode(m)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawZipEntry writes a stored entry without data descriptor, so the local
// header carries crc and sizes.
func rawZipEntry(t testing.TB, zw *zip.Writer, name, body string) {
	t.Helper()
	h := &zip.FileHeader{Name: name, Method: zip.Store, CRC32: crc32.ChecksumIEEE([]byte(body)),
		CompressedSize64: uint64(len(body)), UncompressedSize64: uint64(len(body))}
	h.SetMode(0o644)
	w, err := zw.CreateRaw(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
}

// tent is one tar entry to build.
type tent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
}

func buildTar(t testing.TB, ents ...tent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, ModTime: time.Unix(1_700_000_000, 0)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dest is a test destination: root at base, extraction into base/dst, and
// a sentinel file next to it that must never change.
type dest struct {
	base string
	root *os.Root
}

func newDest(t testing.TB) *dest {
	t.Helper()
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "dst"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "sentinel"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() }) // a root handle: nothing to flush
	return &dest{base: base, root: r}
}

// archiveFile writes data to a file outside the destination and opens it.
func archiveFile(t testing.TB, data []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "archive")
	if err := os.WriteFile(p, data, 0o600); err != nil { //nolint:gosec // G703: p is under t.TempDir()
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() }) // opened read-only
	return f
}

func (d *dest) extract(t testing.TB, data []byte, format Format, lim Limits) (Result, error) {
	t.Helper()
	return Extract(context.Background(), archiveFile(t, data), format, d.root, "dst", lim)
}

// tree lists everything under base (relative, sorted; dirs end in "/").
func (d *dest) tree(t testing.TB) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(d.base, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.base, p)
		if rel == "." {
			return nil
		}
		if de.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// assertUntouched fails unless base holds only the empty dst and the
// unchanged sentinel: no file, no staging directory, nothing outside.
func (d *dest) assertUntouched(t testing.TB) {
	t.Helper()
	got := d.tree(t)
	want := []string{"dst/", "sentinel"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("destination changed: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(d.base, "sentinel")); err != nil || string(b) != "keep" {
		t.Fatalf("sentinel changed: %q %v", b, err)
	}
}

func wantReason(t testing.TB, err error, reason string) *Error {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v (%T), want *Error with reason %s", err, err, reason)
	}
	if ae.Reason != reason {
		t.Fatalf("reason = %s (%v), want %s", ae.Reason, ae, reason)
	}
	return ae
}

// must fails the test on a setup error.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func withSymlinks() Limits {
	l := DefaultLimits()
	l.AllowSymlinks = true
	return l
}
