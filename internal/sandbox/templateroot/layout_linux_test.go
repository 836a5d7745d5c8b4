package templateroot

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sandhold/sandhold/internal/isolate/rootfs"
)

// TestLayoutMakesOwnedTrees: the trees are made with their owners and
// modes above the host id base; a later start keeps what is there (the
// sandbox's own chmod stays); a symlink in a tree's place is refused, not
// followed.
func TestLayoutMakesOwnedTrees(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chowns to a sandbox's host ids: needs root")
	}
	dir := t.TempDir()
	vol, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = vol.Close() }()
	const base = 200000
	if err := Layout(vol, base, 1000, 1001); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		uid, gid uint32
		mode     os.FileMode
	}{
		{Workspace, base + 1000, base + 1001, 0o755},
		{Root, base, base, 0o755},
		{Root + "/" + rootfs.UpperDir, base, base, 0o755},
		{Root + "/" + rootfs.WorkDir, base, base, 0o700},
	} {
		fi, err := os.Lstat(filepath.Join(dir, c.name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode().Perm() != c.mode || st.Uid != c.uid || st.Gid != c.gid {
			t.Errorf("%s: %v %d:%d, want a directory %v %d:%d", c.name, fi.Mode(), st.Uid, st.Gid, c.mode, c.uid, c.gid)
		}
	}
	if err := os.Chmod(filepath.Join(dir, Workspace), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Layout(vol, base, 1000, 1001); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, Workspace)); fi.Mode().Perm() != 0o700 {
		t.Errorf("a later start changed the workspace's mode to %v", fi.Mode().Perm())
	}

	other := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(other, Workspace)); err != nil {
		t.Fatal(err)
	}
	ovol, err := os.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ovol.Close() }()
	if err := Layout(ovol, base, 1000, 1001); err == nil {
		t.Fatal("a symlink in the workspace's place was followed")
	}
}

// TestSelfTestLayer: the layer holds a root's directories and the marker
// file the self-test reads, and busybox only when one is given.
func TestSelfTestLayer(t *testing.T) {
	bb := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(bb, []byte("#!busybox"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bb   string
		want map[string]string
	}{
		{"", map[string]string{"selftest": "template\n"}},
		{bb, map[string]string{"selftest": "template\n", "bin/busybox": "#!busybox"}},
	} {
		raw, err := SelfTestLayer(c.bb)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		dirs := 0
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeDir {
				dirs++
				continue
			}
			b, _ := io.ReadAll(tr)
			files[h.Name] = string(b)
		}
		if dirs != 7 || len(files) != len(c.want) {
			t.Fatalf("busybox %q: %d dirs, files %v; want 7 and %v", c.bb, dirs, files, c.want)
		}
		for k, v := range c.want {
			if files[k] != v {
				t.Fatalf("busybox %q: %s = %q, want %q", c.bb, k, files[k], v)
			}
		}
	}
}
