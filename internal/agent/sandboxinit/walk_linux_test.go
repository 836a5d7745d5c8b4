package sandboxinit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/archive"
)

// deepChain makes dir/x/x/…/x, levels deep, with a file "f" at the bottom
// (relative mkdirat/openat steps: the path passes PATH_MAX).
func deepChain(t *testing.T, dir string, levels int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range levels {
		if err := unix.Mkdirat(fd, "x", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "x", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		fds.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	ffd, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	fds.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = unix.Write(ffd, []byte("needle\n"))
	fds.Close(ffd)
}

// TestWalkDeepChainIsTruncated: a chain deeper than MaxWalkDepth ends the
// walk at the cap and says so (Truncated), while a depth the caller chose
// is a complete answer.
func TestWalkDeepChainIsTruncated(t *testing.T) {
	dir := t.TempDir()
	deepChain(t, dir, 3*proto.MaxWalkDepth)
	w, err := walk(dir, true, &proto.WalkReq{})
	if err != nil {
		t.Fatal(err)
	}
	if !w.Truncated || len(w.Entries) != proto.MaxWalkDepth {
		t.Fatalf("default depth: truncated=%v, %d entries; want truncated and %d", w.Truncated, len(w.Entries), proto.MaxWalkDepth)
	}
	w, err = walk(dir, true, &proto.WalkReq{MaxDepth: 3})
	if err != nil {
		t.Fatal(err)
	}
	if w.Truncated || len(w.Entries) != 3 {
		t.Fatalf("max_depth 3: truncated=%v, %d entries", w.Truncated, len(w.Entries))
	}
	g, err := grep(dir, true, &proto.GrepReq{Pattern: "needle", Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if !g.Truncated || len(g.Matches) != 0 {
		t.Fatalf("grep below the cap: %+v", g)
	}
}

// writableTemp is a temporary directory inside a writable tree (/tmp), or
// a skip: the hard-link rules apply only there.
func writableTemp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil || proto.WritableTree(real) == "" {
		t.Skipf("the temporary directory %s is not below /tmp, where the hard-link rules apply", dir)
	}
	return real
}

// TestCheckTreeRefuses: the pack's check walk refuses a tree holding a
// sensitive name, a hard-linked file, or a name deeper than the pack's
// depth cap, each with its reason, and passes a clean tree.
func TestCheckTreeRefuses(t *testing.T) {
	deny := proto.Deny{Names: []string{"id_rsa"}, Dirs: []string{".ssh"}}
	lim := archive.DefaultLimits()
	cases := []struct {
		name   string
		build  func(t *testing.T, dir string)
		reason string
	}{
		{"clean", func(t *testing.T, dir string) { write(t, dir, "a/b.txt", "x") }, ""},
		{"sensitive dir", func(t *testing.T, dir string) { write(t, dir, "a/.ssh/config", "x") }, reasonSensitive},
		{"hard link", func(t *testing.T, dir string) {
			write(t, dir, "a/b.txt", "x")
			if err := os.Link(filepath.Join(dir, "a/b.txt"), filepath.Join(dir, "c.txt")); err != nil {
				t.Fatal(err)
			}
		}, reasonHardLinked},
		{"deep chain", func(t *testing.T, dir string) { deepChain(t, dir, 300) }, archive.ReasonTooDeep},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writableTemp(t)
			c.build(t, dir)
			err := checkTree(dir, deny, lim)
			if c.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ae *archive.Error
			if !errors.As(err, &ae) || ae.Reason != c.reason {
				t.Fatalf("checkTree = %v, want reason %s", err, c.reason)
			}
			if strings.Contains(ae.Error(), dir) {
				t.Fatalf("the refusal names a host path: %v", ae)
			}
		})
	}
}

// TestGrepSkipsHardLinkedFiles: grep over a directory never reads a file
// with a second name in a writable tree, and refuses one named directly.
func TestGrepSkipsHardLinkedFiles(t *testing.T) {
	dir := writableTemp(t)
	write(t, dir, "key", "KEY-MATERIAL")
	if err := os.Link(filepath.Join(dir, "key"), filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "plain.txt", "KEY-free")
	g, err := grep(dir, true, &proto.GrepReq{Pattern: "KEY", Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Matches) != 1 || !strings.HasSuffix(g.Matches[0].File, "plain.txt") {
		t.Fatalf("matches: %+v", g.Matches)
	}
	if _, err := grep(filepath.Join(dir, "notes.txt"), true, &proto.GrepReq{Pattern: "KEY"}); err == nil {
		t.Fatal("grep of a hard-linked file named directly succeeded")
	}
	if g, err := grep(dir, true, &proto.GrepReq{Pattern: "KEY", Recursive: true, Deny: proto.Deny{AllowHardLinked: true}}); err != nil || len(g.Matches) != 3 {
		t.Fatalf("AllowHardLinked: %v %+v", err, g)
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil { //nolint:gosec // G306: a test fixture
		t.Fatal(err)
	}
}
