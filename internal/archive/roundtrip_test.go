package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// srcTree is the tree every round trip packs: nested dirs, several modes,
// an empty file, an empty dir, a nested archive and incompressible data.
var srcTree = []struct {
	name string
	mode fs.FileMode // dirs end in "/"
	body string
}{
	{"a/", 0o755, ""},
	{"a/b/", 0o700, ""},
	{"a/b/c/", 0o755, ""},
	{"a/b/c/deep.txt", 0o600, "deep"},
	{"a/exec.sh", 0o755, "#!/bin/sh\necho hi\n"},
	{"a/read-only.txt", 0o444, "ro"},
	{"empty/", 0o755, ""},
	{"empty-file", 0o644, ""},
	{"inner.zip", 0o644, ""}, // filled with a zip below: never auto-extracted
	{"noise.bin", 0o640, ""}, // filled with incompressible bytes below
	{"top.txt", 0o644, "top level\n"},
}

func makeSrc(t testing.TB) (*os.Root, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	want := map[string]string{}
	for _, e := range srcTree {
		p := filepath.Join(dir, "src", e.name)
		if strings.HasSuffix(e.name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			want[strings.TrimSuffix(e.name, "/")] = "dir " + e.mode.String()
			continue
		}
		body := e.body
		switch e.name {
		case "inner.zip":
			body = string(buildZip(t, zent{name: "../evil", body: "x"}))
		case "noise.bin":
			body = noise(7, 200_000)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		want[e.name] = e.mode.String() + " " + body
	}
	// Modes last (a 0700 parent still lets root write; chmod after content).
	for _, e := range srcTree {
		if err := os.Chmod(filepath.Join(dir, "src", e.name), e.mode); err != nil {
			t.Fatal(err)
		}
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() }) // a root handle: nothing to flush
	return r, want
}

// readTree maps every name under dir to "mode content" ("dir mode" for dirs).
func readTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			got[filepath.ToSlash(rel)] = "dir " + fi.Mode().Perm().String()
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			got[filepath.ToSlash(rel)] = "link " + l
		default:
			b, err := os.ReadFile(p) //nolint:gosec // G122: a tree this test built in t.TempDir(); nothing races it
			if err != nil {
				return err
			}
			got[filepath.ToSlash(rel)] = fi.Mode().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPackExtractRoundTrip(t *testing.T) {
	for _, format := range []Format{FormatZip, FormatTar, FormatTarGz, FormatTarZst} {
		t.Run(string(format), func(t *testing.T) {
			src, want := makeSrc(t)
			var buf bytes.Buffer
			pres, err := Pack(context.Background(), &buf, src, "src", format, DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if pres.Files != 7 || pres.Dirs != 4 || pres.Skipped != 0 {
				t.Fatalf("pack result %+v", pres)
			}
			if got, err := Detect(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil || got != format {
				t.Fatalf("Detect = %q %v", got, err)
			}
			d := newDest(t)
			res, err := d.extract(t, buf.Bytes(), format, DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if res.Files != 7 || res.Dirs != 4 || res.Bytes != pres.Bytes || res.Stripped != 0 {
				t.Fatalf("extract result %+v, pack %+v", res, pres)
			}
			got := readTree(t, filepath.Join(d.base, "dst"))
			if len(got) != len(want) {
				t.Fatalf("got %d names, want %d: %v", len(got), len(want), keys(got))
			}
			for name, w := range want {
				if got[name] != w {
					t.Errorf("%s: got %.40q, want %.40q", name, got[name], w)
				}
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestPackSkipsAndStrips(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	must(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "suid"), []byte("s"), 0o755))
	if err := os.Chmod(filepath.Join(src, "suid"), 0o4755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink("/etc/passwd", filepath.Join(src, "link-out")))
	must(t, os.Symlink("suid", filepath.Join(src, "link-in")))
	must(t, os.Symlink("/etc", filepath.Join(src, "sub", "dirlink")))
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(src, "bad\nname"), []byte("x"), 0o644))
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() //nolint:errcheck // a root handle: nothing to flush
	var buf bytes.Buffer
	res, err := Pack(context.Background(), &buf, r, "src", FormatTar, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 1 || res.Dirs != 1 || res.Skipped != 5 || res.Stripped != 1 {
		t.Fatalf("result %+v", res)
	}
	tr := tar.NewReader(&buf)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Name == "suid" && h.Mode != 0o755 {
			t.Fatalf("suid packed with mode %o", h.Mode)
		}
	}
	if strings.Join(names, ",") != "sub/,suid" {
		t.Fatalf("names %q", names)
	}
}

func TestPackLimits(t *testing.T) {
	src, _ := makeSrc(t)
	cases := []struct {
		name   string
		lim    func(*Limits)
		reason string
	}{
		{"entries", func(l *Limits) { l.MaxEntries = 5 }, ReasonTooManyEntries},
		{"entry-bytes", func(l *Limits) { l.MaxEntryBytes = 1000 }, ReasonEntryTooLarge},
		{"total-bytes", func(l *Limits) { l.MaxTotalBytes = 100_000 }, ReasonTotalTooLarge},
		{"depth", func(l *Limits) { l.MaxDepth = 2 }, ReasonTooDeep},
		{"path-len", func(l *Limits) { l.MaxPathLen = 8 }, ReasonNameTooLong},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := DefaultLimits()
			tc.lim(&l)
			_, err := Pack(context.Background(), &bytes.Buffer{}, src, "src", FormatZip, l)
			_ = wantReason(t, err, tc.reason)
		})
	}
	if _, err := Pack(context.Background(), &bytes.Buffer{}, src, "../", FormatZip, DefaultLimits()); err == nil {
		t.Fatal("packing outside the root succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Pack(ctx, &bytes.Buffer{}, src, "src", FormatTarGz, DefaultLimits())
	_ = wantReason(t, err, ReasonCanceled)
}

func TestExtractStripsSpecialBits(t *testing.T) {
	d := newDest(t)
	data := buildTar(t,
		tent{name: "d/", typ: tar.TypeDir, mode: 0o3777}, // setgid+sticky, world-writable
		tent{name: "d/suid", body: "x", mode: 0o4755},
		tent{name: "d/sgid", body: "x", mode: 0o2775},
		tent{name: "plain", body: "x", mode: 0o666},
		tent{name: "readonly", body: "x", mode: 0o400},
	)
	res, err := d.extract(t, data, FormatTar, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if res.Stripped != 3 || res.Files != 4 || res.Dirs != 1 {
		t.Fatalf("result %+v", res)
	}
	for name, want := range map[string]fs.FileMode{"d": fs.ModeDir | 0o755, "d/suid": 0o755, "d/sgid": 0o755, "plain": 0o644, "readonly": 0o400} {
		fi, err := os.Lstat(filepath.Join(d.base, "dst", name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
	}
}

func TestExtractAllowedSymlinks(t *testing.T) {
	d := newDest(t)
	data := buildTar(t,
		tent{name: "d/f", body: "x"},
		tent{name: "d/up", typ: tar.TypeSymlink, link: "../top"},
		tent{name: "l", typ: tar.TypeSymlink, link: "d/f"},
		tent{name: "dot", typ: tar.TypeSymlink, link: "."},
		tent{name: "top", body: "t"},
	)
	res, err := d.extract(t, data, FormatTar, withSymlinks())
	if err != nil {
		t.Fatal(err)
	}
	if res.Symlinks != 3 || res.Files != 2 {
		t.Fatalf("result %+v", res)
	}
	got := readTree(t, filepath.Join(d.base, "dst"))
	if got["l"] != "link d/f" || got["d/up"] != "link ../top" || got["dot"] != "link ." {
		t.Fatalf("tree %v", got)
	}
}

func TestExtractDotSlashNames(t *testing.T) {
	// `tar -C dir -cf x .` writes "./" and "./a": both are fine.
	d := newDest(t)
	data := buildTar(t, tent{name: "./", typ: tar.TypeDir}, tent{name: "./a/", typ: tar.TypeDir}, tent{name: "./a/b", body: "b"})
	res, err := d.extract(t, data, FormatTar, DefaultLimits())
	if err != nil || res.Files != 1 || res.Dirs != 1 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(d.base, "dst", "a", "b")); string(b) != "b" {
		t.Fatalf("content %q", b)
	}
}

func TestExtractIntoRootItself(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "existing"), []byte("e"), 0o644))
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() //nolint:errcheck // a root handle: nothing to flush
	data := buildZip(t, zent{name: "x/y", body: "y"}, zent{name: "z", body: "z"})
	res, err := Extract(context.Background(), archiveFile(t, data), FormatZip, r, ".", DefaultLimits())
	if err != nil || res.Files != 2 || res.Dirs != 1 {
		t.Fatalf("res %+v err %v", res, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "existing,x,z" {
		t.Fatalf("root holds %q", names)
	}
	// The same archive again conflicts and changes nothing.
	_, err = Extract(context.Background(), archiveFile(t, data), FormatZip, r, ".", DefaultLimits())
	_ = wantReason(t, err, ReasonTargetExists)
	if ents2, _ := os.ReadDir(dir); len(ents2) != 3 {
		t.Fatalf("root changed: %v", ents2)
	}
}
