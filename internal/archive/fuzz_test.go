package archive

import (
	"archive/tar"
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func fuzzLimits(data []byte) Limits {
	return Limits{
		MaxEntries:    64,
		MaxTotalBytes: 1 << 20,
		MaxEntryBytes: 256 << 10,
		MaxRatio:      100,
		RatioFloor:    64 << 10,
		MaxDepth:      8,
		MaxPathLen:    256,
		AllowSymlinks: len(data)%2 == 1, // exercise both policies
	}
}

// checkContained is the fuzz property: nothing outside dst changed, no
// staging directory survives, a refusal leaves dst empty, and every
// symlink written resolves (lexically) inside dst.
func checkContained(t *testing.T, d *dest, err error) {
	t.Helper()
	if err != nil {
		var ae *Error
		if !errors.As(err, &ae) {
			t.Fatalf("error is not an *Error: %T %v", err, err)
		}
		d.assertUntouched(t)
		return
	}
	dst := filepath.Join(d.base, "dst")
	for _, p := range d.tree(t) {
		if p != "dst/" && p != "sentinel" && !strings.HasPrefix(p, "dst/") {
			t.Fatalf("wrote outside the destination: %q", p)
		}
		if strings.Contains(p, stagingPrefix) {
			t.Fatalf("staging left behind: %q", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(d.base, "sentinel")); err != nil || string(b) != "keep" {
		t.Fatalf("sentinel changed")
	}
	walkErr := filepath.WalkDir(dst, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, _ := os.Readlink(p)
		rel, _ := filepath.Rel(dst, filepath.Dir(p))
		if path.IsAbs(target) || strings.HasPrefix(path.Clean(path.Join(filepath.ToSlash(rel), target)), "..") {
			t.Fatalf("symlink %q -> %q leaves the destination", p, target)
		}
		return nil
	})
	if walkErr != nil {
		t.Fatal(walkErr)
	}
}

func FuzzExtractZip(f *testing.F) {
	f.Add(buildZip(f, zent{name: "a/b.txt", body: "hello"}, zent{name: "c/"}))
	f.Add(buildZip(f, zent{name: "../x", body: "x"}))
	f.Add(buildZip(f, zent{name: "a", body: "..", mode: fs.ModeSymlink | 0o777}, zent{name: "a/x", body: "x"}))
	f.Add(buildZip(f, zent{name: "l", body: "d/f", mode: fs.ModeSymlink | 0o777}, zent{name: "d/f", body: "f"}))
	f.Add(buildZip(f, zent{name: "A.txt"}, zent{name: "a.txt"}))
	f.Add(buildZip(f, zent{name: "s", body: "x", mode: 0o4755}))
	f.Add(overlappingZip(f))
	f.Add(manyZip(f, 70, 3))
	f.Add(zip64ClaimZip())
	f.Add(zerosZip(f, 1<<20))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDest(t)
		_, err := Extract(context.Background(), archiveFile(t, data), FormatZip, d.root, "dst", fuzzLimits(data))
		checkContained(t, d, err)
	})
}

func FuzzExtractTar(f *testing.F) {
	f.Add(buildTar(f, tent{name: "a/b.txt", body: "hello"}, tent{name: "c/", typ: tar.TypeDir}))
	f.Add(buildTar(f, tent{name: "../x", body: "x"}))
	f.Add(buildTar(f, tent{name: "a", typ: tar.TypeSymlink, link: "/etc"}, tent{name: "a/passwd", body: "x"}))
	f.Add(buildTar(f, tent{name: "d/l", typ: tar.TypeSymlink, link: ".."}, tent{name: "m", typ: tar.TypeSymlink, link: "d/l/.."}))
	f.Add(buildTar(f, tent{name: "d/f", body: "x"}, tent{name: "l", typ: tar.TypeSymlink, link: "d/f"}))
	f.Add(buildTar(f, tent{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}))
	f.Add(buildTar(f, tent{name: "p", typ: tar.TypeFifo}))
	f.Add(buildTar(f, tent{name: "./", typ: tar.TypeDir}, tent{name: "./a", body: "a", mode: 0o6755}))
	f.Add(patchTarSize(f, buildTar(f, tent{name: "a", body: "hello"}), 10000))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDest(t)
		_, err := Extract(context.Background(), archiveFile(t, data), FormatTar, d.root, "dst", fuzzLimits(data))
		checkContained(t, d, err)
	})
}
