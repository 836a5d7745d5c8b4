package snapshot

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/testenv"
)

// shared tells whether every extent of path shares its blocks (FIEMAP's
// shared flag, as filefrag prints it).
func shared(t *testing.T, path string) bool {
	t.Helper()
	out, err := exec.Command("filefrag", "-v", path).CombinedOutput()
	if err != nil {
		t.Fatalf("filefrag: %v: %s", err, out)
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, "..") || !strings.Contains(l, ":") {
			continue // not an extent row
		}
		n++
		if !strings.Contains(l, "shared") {
			return false
		}
	}
	return n > 0
}

// TestReflinkClones: on a file system that shares blocks, a snapshot's new
// chunks are clones of the image's blocks and a restore clones them back:
// no data block is copied either way.
func TestReflinkClones(t *testing.T) {
	mnt := testenv.RequireXFS(t)
	if _, err := exec.LookPath("filefrag"); err != nil {
		t.Skip("filefrag not installed (e2fsprogs)")
	}
	ctx := context.Background()
	s, err := Open(filepath.Join(mnt, "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(64 << 20)
	f, err := os.Create(filepath.Join(mnt, "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	_ = f.Truncate(size)
	if _, err := f.WriteAt(random(t, 8<<20), 4<<20); err != nil {
		t.Fatal(err)
	}
	_ = f.Sync()
	m, err := s.Capture(ctx, f, size, Info{Owner: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err = s.WaitSealed(ctx, m); err != nil { // chunked after the answer
		t.Fatal(err)
	}
	if len(m.Chunks) != 2 {
		t.Fatalf("%d chunks", len(m.Chunks))
	}
	for _, c := range m.Chunks {
		if p := chunkPath(s.ownerDir("k"), c.Digest); !shared(t, p) {
			t.Errorf("chunk %s was copied, not cloned", c.Digest[:12])
		}
	}
	out := filepath.Join(mnt, "restored.img")
	if err := s.Restore(ctx, m, out); err != nil {
		t.Fatal(err)
	}
	if !shared(t, out) {
		t.Error("the restored image was copied, not cloned")
	}
	sameFile(t, f, out)
}
