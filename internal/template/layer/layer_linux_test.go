package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/archive/spec"
	"github.com/sandhold/sandhold/internal/testenv"
)

// ent is one entry of a test layer.
type ent struct {
	name, body, link string
	typ              byte
	mode             int64
	uid              int
	pax              map[string]string
}

func tarOf(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.link, Uid: e.uid, Gid: e.uid,
			ModTime: time.Unix(1_700_000_000, 0), PAXRecords: e.pax}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
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

func requireRoot(t testing.TB) {
	t.Helper()
	testenv.SkipShort(t, "unpacks layers as root")
	if os.Geteuid() != 0 {
		t.Skip("unpacking a layer sets owners and makes whiteouts: run as root")
	}
}

// unpackInto unpacks b into a fresh layer directory below a parent that
// also holds a sentinel; it checks nothing else appeared beside the layer.
func unpackInto(t *testing.T, b []byte, lim Limits) (string, Stats, error) {
	t.Helper()
	parent := t.TempDir()
	if err := os.WriteFile(filepath.Join(parent, "sentinel"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "layer")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := Unpack(context.Background(), bytes.NewReader(b), dir, lim)
	entries, _ := os.ReadDir(parent)
	if len(entries) != 2 {
		t.Errorf("the layer's parent holds %d entries, want the layer and the sentinel", len(entries))
	}
	if c, _ := os.ReadFile(filepath.Join(parent, "sentinel")); string(c) != "x" {
		t.Error("the sentinel beside the layer changed")
	}
	return dir, st, err
}

func TestUnpackRefusesHostileLayers(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		name   string
		ents   []ent
		reason string
	}{
		{"dot-dot", []ent{{name: "../evil", body: "x"}}, spec.ReasonParentComponent},
		{"dot-dot deep", []ent{{name: "a/../../evil", body: "x"}}, spec.ReasonParentComponent},
		{"absolute", []ent{{name: "/etc/evil", body: "x"}}, spec.ReasonAbsolute},
		{"control character", []ent{{name: "a\x01b", body: "x"}}, spec.ReasonControlChar},
		{"backslash", []ent{{name: `a\..\b`, body: "x"}}, spec.ReasonBackslash},
		{"write through an absolute symlink", []ent{{name: "etc", typ: tar.TypeSymlink, link: "/etc"}, {name: "etc/passwd", body: "x"}}, spec.ReasonWriteThrough},
		{"write through a relative symlink out", []ent{{name: "up", typ: tar.TypeSymlink, link: "../../.."}, {name: "up/tmp/evil", body: "x"}}, spec.ReasonWriteThrough},
		{"directory through a symlink", []ent{{name: "d", typ: tar.TypeSymlink, link: "/"}, {name: "d/x/", typ: tar.TypeDir}}, spec.ReasonWriteThrough},
		{"hardlink out", []ent{{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}}, spec.ReasonHardlink},
		{"hardlink to a host path", []ent{{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}}, spec.ReasonHardlink},
		{"hardlink to a lower layer's file", []ent{{name: "h", typ: tar.TypeLink, link: "usr/bin/python3"}}, spec.ReasonHardlink},
		{"hardlink to a symlink", []ent{{name: "s", typ: tar.TypeSymlink, link: "/etc/shadow"}, {name: "h", typ: tar.TypeLink, link: "s"}}, spec.ReasonHardlink},
		{"char device", []ent{{name: "dev/mem", typ: tar.TypeChar}}, spec.ReasonSpecialFile},
		{"block device", []ent{{name: "dev/sda", typ: tar.TypeBlock}}, spec.ReasonSpecialFile},
		{"fifo", []ent{{name: "fifo", typ: tar.TypeFifo}}, spec.ReasonSpecialFile},
		{"duplicate", []ent{{name: "a", body: "1"}, {name: "a", body: "2"}}, spec.ReasonDuplicate},
		{"whiteout of the same layer's file", []ent{{name: "a", body: "1"}, {name: ".wh.a", body: ""}}, spec.ReasonDuplicate},
		{"empty whiteout", []ent{{name: "d/.wh.", body: ""}}, spec.ReasonReservedName},
		{"whiteout-named directory", []ent{{name: ".wh.x/y", body: ""}}, spec.ReasonReservedName},
		{"opaque root", []ent{{name: ".wh..wh..opq", body: ""}}, spec.ReasonReservedName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := unpackInto(t, tarOf(t, c.ents...), DefaultLimits())
			var se *spec.Error
			if !errors.As(err, &se) || se.Reason != c.reason {
				t.Fatalf("got %v, want a refusal %q", err, c.reason)
			}
			if strings.Contains(se.Error(), filepath.Join(os.TempDir(), "Test")) {
				t.Errorf("the refusal names a host path: %v", se)
			}
		})
	}
}

func TestUnpackNeutralisesWhatItKeeps(t *testing.T) {
	requireRoot(t)
	b := tarOf(t,
		ent{name: "./", typ: tar.TypeDir, mode: 0o755},
		ent{name: "usr/bin/su", body: "binary", mode: 0o4755},
		ent{name: "usr/bin/wall", body: "binary", mode: 0o2755},
		ent{name: "usr/bin/ping", body: "ping", mode: 0o755, pax: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00"}},
		ent{name: "etc/opq/", typ: tar.TypeDir, pax: map[string]string{"SCHILY.xattr.user.overlay.redirect": "/etc/shadow"}},
		ent{name: "etc/localtime", typ: tar.TypeSymlink, link: "/usr/share/zoneinfo/UTC"},
		ent{name: "outside", typ: tar.TypeSymlink, link: "../../../../../etc/shadow"},
		ent{name: "home/u/", typ: tar.TypeDir, mode: 0o700, uid: 1000},
		ent{name: "big-uid", body: "x", uid: 100000},
		ent{name: "neg-uid", body: "x", uid: -5},
		ent{name: "usr/bin/hard", typ: tar.TypeLink, link: "usr/bin/ping"},
		ent{name: ".wh.workspace", body: ""},
		ent{name: "var/.wh.cache", body: ""},
		ent{name: "etc/opq/.wh..wh..opq", body: ""},
		ent{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
	)
	dir, st, err := unpackInto(t, b, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if st.Stripped != 2 || st.Whiteouts != 3 {
		t.Errorf("stats %+v: want 2 stripped, 3 whiteouts", st)
	}
	mode := func(p string) os.FileMode {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	for _, p := range []string{"usr/bin/su", "usr/bin/wall"} {
		if m := mode(p); m&(os.ModeSetuid|os.ModeSetgid) != 0 || m.Perm() != 0o755 {
			t.Errorf("%s: mode %v", p, m)
		}
	}
	if m := mode("tmp"); m&os.ModeSticky == 0 {
		t.Errorf("tmp lost its sticky bit: %v", m)
	}
	buf := make([]byte, 64)
	for _, c := range []struct{ path, attr string }{{"usr/bin/ping", "security.capability"}, {"etc/opq", "user.overlay.redirect"}} {
		if _, err := unix.Lgetxattr(filepath.Join(dir, c.path), c.attr, buf); err == nil {
			t.Errorf("%s carries %s from the image", c.path, c.attr)
		}
	}
	if n, err := unix.Lgetxattr(filepath.Join(dir, "etc/opq"), OpaqueXattr, buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("etc/opq is not opaque: %v", err)
	}
	for _, p := range []string{"workspace", "var/cache"} {
		var s unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, p), &s); err != nil || s.Mode&unix.S_IFMT != unix.S_IFCHR || s.Rdev != 0 {
			t.Errorf("%s is not an overlay whiteout: %v", p, err)
		}
	}
	owners := map[string]uint32{"home/u": 1000, "big-uid": Nobody, "neg-uid": Nobody, "usr/bin/su": 0}
	for p, want := range owners {
		var s unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, p), &s); err != nil || s.Uid != want || s.Gid != want {
			t.Errorf("%s: owner %d:%d, want %d (%v)", p, s.Uid, s.Gid, want, err)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "outside")); err != nil || target != "../../../../../etc/shadow" {
		t.Errorf("the symlink is stored as %q %v (a target is only ever resolved inside a sandbox)", target, err)
	}
	var a, h unix.Stat_t
	if unix.Lstat(filepath.Join(dir, "usr/bin/ping"), &a) != nil || unix.Lstat(filepath.Join(dir, "usr/bin/hard"), &h) != nil || a.Ino != h.Ino {
		t.Error("the hardlink is not a link to the same layer's file")
	}
}

// TestUnpackRefusesBombs: the caps stop a 100,000-file layer and a 10 GB
// (sparse) file, without writing past them.
func TestUnpackRefusesBombs(t *testing.T) {
	requireRoot(t)
	t.Run("100k files", func(t *testing.T) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for i := range 100_000 {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/f%d", i/1000, i), Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
				t.Fatal(err)
			}
		}
		_ = tw.Close()
		// The default cap refuses this bomb; a smaller one shows the
		// refusal comes at the cap, without making 65,536 files here.
		if DefaultLimits().MaxEntries >= 100_000 {
			t.Fatalf("the default cap (%d entries) lets a 100,000-file layer in", DefaultLimits().MaxEntries)
		}
		lim := DefaultLimits()
		lim.MaxEntries = 5000
		dir, st, err := unpackInto(t, buf.Bytes(), lim)
		var se *spec.Error
		if !errors.As(err, &se) || se.Reason != spec.ReasonTooManyEntries {
			t.Fatalf("got %v, want too_many_entries", err)
		}
		if n := countTree(t, dir); n > lim.MaxEntries || st.Entries > lim.MaxEntries {
			t.Errorf("%d entries on disk (%d counted), cap %d", n, st.Entries, lim.MaxEntries)
		}
	})
	t.Run("10 GB sparse file", func(t *testing.T) {
		// The header claims 10 GB; the content never comes: the claim is
		// refused before anything is read or written.
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		_ = tw.WriteHeader(&tar.Header{Name: "sparse", Typeflag: tar.TypeReg, Mode: 0o644, Size: 10 << 30})
		dir, _, err := unpackInto(t, buf.Bytes(), DefaultLimits())
		var se *spec.Error
		if !errors.As(err, &se) || se.Reason != spec.ReasonTotalTooLarge {
			t.Fatalf("got %v, want total_too_large", err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "sparse")); err == nil {
			t.Error("the refused file was created")
		}
	})
	t.Run("actual bytes past the cap", func(t *testing.T) {
		lim := DefaultLimits()
		lim.MaxBytes = 1 << 20
		b := tarOf(t, ent{name: "a", body: strings.Repeat("x", 600<<10)}, ent{name: "b", body: strings.Repeat("y", 600<<10)})
		_, _, err := unpackInto(t, b, lim)
		var se *spec.Error
		if !errors.As(err, &se) || se.Reason != spec.ReasonTotalTooLarge {
			t.Fatalf("got %v, want total_too_large", err)
		}
	})
	t.Run("zeros stay holes", func(t *testing.T) {
		b := tarOf(t, ent{name: "zeros", body: string(make([]byte, 8<<20))})
		dir, st, err := unpackInto(t, b, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		var s unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, "zeros"), &s); err != nil || s.Size != 8<<20 || st.Bytes != 8<<20 {
			t.Fatalf("size %d, counted %d: %v", s.Size, st.Bytes, err)
		}
		if s.Blocks*512 > 1<<20 {
			t.Errorf("8 MB of zeros take %d bytes on disk", s.Blocks*512)
		}
	})
}

func countTree(t *testing.T, dir string) int {
	t.Helper()
	n := -1 // the root
	_ = filepath.WalkDir(dir, func(string, os.DirEntry, error) error { n++; return nil })
	return n
}

// TestPackRoundTrip: an overlay upper directory packs to an OCI layer whose
// unpacking gives the same tree (whiteouts, opaque directories, links,
// owners mapped from the sandbox's range) and leaves out what a layer must
// not hold.
func TestPackRoundTrip(t *testing.T) {
	requireRoot(t)
	const base = 1 << 30
	up := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(up, "usr/local/bin"), 0o755))
	must(os.WriteFile(filepath.Join(up, "usr/local/bin/tool"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Link(filepath.Join(up, "usr/local/bin/tool"), filepath.Join(up, "usr/local/bin/tool2")))
	must(os.Symlink("/usr/local/bin/tool", filepath.Join(up, "usr/local/bin/link")))
	must(unix.Mknod(filepath.Join(up, "usr/gone"), unix.S_IFCHR, 0))
	must(os.MkdirAll(filepath.Join(up, "etc/opq"), 0o755))
	must(unix.Setxattr(filepath.Join(up, "etc/opq"), OpaqueXattr, []byte("y"), 0))
	must(os.WriteFile(filepath.Join(up, "etc/opq/new"), []byte("n"), 0o644))
	must(unix.Mkfifo(filepath.Join(up, "fifo"), 0o644))
	must(os.MkdirAll(filepath.Join(up, "workspace/x"), 0o755))
	must(os.MkdirAll(filepath.Join(up, "home/u"), 0o700))
	must(os.Chown(filepath.Join(up, "home/u"), base+1000, base+1000))
	must(os.Chown(filepath.Join(up, "usr/local/bin/tool"), base, base))
	must(unix.Chmod(filepath.Join(up, "usr/local/bin/tool"), 0o4755))      // after chown, which clears it
	must(os.Lchown(filepath.Join(up, "usr/local/bin/link"), 12345, 12345)) // outside the range
	f, err := os.Open(up)
	must(err)
	defer func() { _ = f.Close() }()
	var packed bytes.Buffer
	st, err := Pack(context.Background(), &packed, PackSpec{Upper: f, IDBase: base, Exclude: []string{"workspace"}, Limits: DefaultLimits()})
	must(err)
	if st.Skipped != 2 || st.Stripped != 2 || st.Whiteouts != 2 {
		t.Errorf("pack stats %+v: want the fifo and workspace skipped, set-id stripped twice (two names of one file), 2 whiteouts", st)
	}
	var again bytes.Buffer
	_, _ = f.Seek(0, io.SeekStart)
	if _, err := Pack(context.Background(), &again, PackSpec{Upper: f, IDBase: base, Exclude: []string{"workspace"}, Limits: DefaultLimits()}); err != nil || !bytes.Equal(packed.Bytes(), again.Bytes()) {
		t.Errorf("packing the same tree twice gave different bytes (%v)", err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(packed.Bytes()))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	sort.Strings(names)
	want := []string{"etc/", "etc/opq/", "etc/opq/.wh..wh..opq", "etc/opq/new", "home/", "home/u/", "usr/", "usr/.wh.gone", "usr/local/", "usr/local/bin/", "usr/local/bin/link", "usr/local/bin/tool", "usr/local/bin/tool2"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("packed %v\nwant   %v", names, want)
	}
	dir, _, err := unpackInto(t, packed.Bytes(), DefaultLimits())
	must(err)
	var s unix.Stat_t
	must(unix.Lstat(filepath.Join(dir, "home/u"), &s))
	if s.Uid != 1000 {
		t.Errorf("home/u belongs to %d after the round trip, want 1000", s.Uid)
	}
	must(unix.Lstat(filepath.Join(dir, "usr/local/bin/tool"), &s))
	if s.Uid != 0 || s.Mode&0o7777 != 0o755 {
		t.Errorf("tool: uid %d mode %o", s.Uid, s.Mode&0o7777)
	}
	must(unix.Lstat(filepath.Join(dir, "usr/local/bin/link"), &s))
	if s.Uid != Nobody {
		t.Errorf("an owner outside the sandbox's range became %d, want nobody", s.Uid)
	}
	must(unix.Lstat(filepath.Join(dir, "usr/gone"), &s))
	if s.Mode&unix.S_IFMT != unix.S_IFCHR || s.Rdev != 0 {
		t.Error("the whiteout did not survive the round trip")
	}
}

func FuzzUnpack(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("unpacking needs root")
	}
	f.Add(tarOf(f, ent{name: "a/b", body: "x"}, ent{name: "a/.wh.c", body: ""}))
	f.Add(tarOf(f, ent{name: "l", typ: tar.TypeSymlink, link: "/"}, ent{name: "l/x", body: "x"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "layer")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		lim := DefaultLimits()
		lim.MaxEntries, lim.MaxBytes = 1000, 1<<20
		_, _ = Unpack(context.Background(), bytes.NewReader(b), dir, lim)
		if entries, _ := os.ReadDir(parent); len(entries) != 1 {
			t.Fatalf("something was written beside the layer: %v", entries)
		}
	})
}
