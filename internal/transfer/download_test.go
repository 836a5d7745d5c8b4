package transfer

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/workspace"
)

// hostOpener opens host files, standing in for a sandbox's init.
type hostOpener struct{ dir string }

func (h hostOpener) File(_ context.Context, _ agent.Op, r agent.FileReq) (*agent.FileResp, *os.File, error) {
	f, err := os.Open(filepath.Join(h.dir, r.Path))
	return &agent.FileResp{}, f, err
}

func TestChangeDetection(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	cases := []struct {
		name   string
		change func(t *testing.T)
	}{
		{"append", func(t *testing.T) {
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			_, _ = f.WriteString("x")
			_ = f.Close()
		}},
		{"same-size overwrite", func(t *testing.T) {
			f, _ := os.OpenFile(p, os.O_WRONLY, 0)
			_, _ = f.WriteAt([]byte("Z"), 3)
			_ = f.Close()
		}},
		{"truncate", func(t *testing.T) { _ = os.Truncate(p, 2) }},
		{"chmod", func(t *testing.T) { _ = os.Chmod(p, 0o600) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := openRegular(context.Background(), hostOpener{dir}, "download", workspace.Located{Given: "/f", Resolved: "/f"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.File.Close() }()
			if d.Changed() {
				t.Fatal("changed before any change")
			}
			r := d.Content(true)
			buf := make([]byte, 4)
			if _, err := r.Read(buf); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // coarse timestamps on some file systems
			c.change(t)
			if !d.Changed() {
				t.Fatal("change not seen")
			}
			if _, err := io.ReadAll(r); !errors.Is(err, ErrChanged) {
				t.Fatalf("read after the change: %v, want ErrChanged", err)
			}
			// ignore delivers regardless.
			if _, err := io.ReadAll(d.Content(false)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPathPrefixAndNames(t *testing.T) {
	for _, c := range []struct {
		p    string
		ok   bool
		name string
	}{
		{"/workspace", true, "workspace itself"},
		{"/workspace/a/b", true, "below workspace"},
		{"/workspacex/a", false, "look-alike"},
		{"/tmp/x", true, "tmp"},
		{"/usr/lib", false, "read-only tree"},
		{"/", false, "root"},
	} {
		if _, ok := writableTop(c.p); ok != c.ok {
			t.Errorf("%s: writableTop(%q) = %v", c.name, c.p, ok)
		}
	}
	for _, c := range []struct {
		n  string
		ok bool
	}{{"data.bin", true}, {".hidden", false}, {"a/b", false}, {"up_0123456789abcdef0123456789abcdef", false}, {"", false}, {"x y", false}} {
		if got := artifactName.MatchString(c.n) && !uploadID.MatchString(c.n); got != c.ok {
			t.Errorf("artifact name %q: %v", c.n, got)
		}
	}
}
