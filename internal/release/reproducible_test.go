package release

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReproducibleBuild builds the real server twice for linux/amd64,
// from two copies of the working tree at different paths, with the
// release flags and stamps, and requires identical bytes: anyone can
// rebuild a release from its commit and compare.
func TestReproducibleBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server twice")
	}
	need(t, "git")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	ctx := context.Background()
	commit := strings.Repeat("0123456789", 4)
	var bins [2][]byte
	for i := range bins {
		// Different depths and names: -trimpath must hide them.
		tree := filepath.Join(t.TempDir(), strings.Repeat("x", i+1), "src")
		if err := SnapshotTree(ctx, root, tree); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "sandhold")
		if err := Build(ctx, BuildOptions{SrcDir: tree, Out: out, Arch: "amd64", Version: "v0.0.0-test", Commit: commit}); err != nil {
			t.Fatal(err)
		}
		if bins[i], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(bins[0], bins[1]) {
		t.Fatalf("two builds of the same tree differ (%d and %d bytes)", len(bins[0]), len(bins[1]))
	}
	if !bytes.Contains(bins[0], []byte(commit)) || bytes.Contains(bins[0], []byte(root)) {
		t.Fatal("the binary lacks the commit stamp or carries the build path")
	}
	t.Logf("two builds: %d bytes each, identical", len(bins[0]))
}

// TestBuildsForEveryArch: the server compiles for every release arch
// (platform code such as a stat field's width differs between amd64 and
// arm64; a plain `go test` on amd64 never sees the other).
func TestBuildsForEveryArch(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds the server")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Built from a snapshot: the test reads every source file itself, so
	// go test's cache knows the result depends on them.
	tree := filepath.Join(t.TempDir(), "src")
	if err := SnapshotTree(context.Background(), root, tree); err != nil {
		t.Fatal(err)
	}
	for _, arch := range Arches {
		if arch == "amd64" {
			continue // TestReproducibleBuild builds it
		}
		out := filepath.Join(t.TempDir(), "sandhold")
		err := Build(context.Background(), BuildOptions{SrcDir: tree, Out: out, Arch: arch, Version: "v0.0.0-test", Commit: strings.Repeat("0", 40)})
		if err != nil {
			t.Errorf("linux/%s: %v", arch, err)
		}
	}
}
