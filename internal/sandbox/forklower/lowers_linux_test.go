package forklower

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

const snapA, snapB = "sn0123456789abcdef", "snfedcba9876543210"

// TestMarkerNamesTheLayout: a workspace with a marker and no disk.img is
// layered on the marker's snapshot; a disk.img wins (its flattening is
// finished: the marker and upper image go); a marker that names no
// snapshot is an error, not a layout; RemoveFresh undoes a fresh one.
func TestMarkerNamesTheLayout(t *testing.T) {
	dir := t.TempDir()
	if _, layered, err := LayeredOn(dir); err != nil || layered {
		t.Fatalf("empty workspace: layered %v, %v", layered, err)
	}
	if err := WriteMarker(dir, snapA); err != nil {
		t.Fatal(err)
	}
	if snap, layered, err := LayeredOn(dir); err != nil || !layered || snap != snapA {
		t.Fatalf("marked workspace: %q %v %v, want %s", snap, layered, err, snapA)
	}
	if err := WriteMarker(dir, snapB); err == nil {
		t.Fatal("a second marker replaced the first")
	}
	for _, n := range []string{UpperImage, UpperImage + volume.TmpSuffix} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveFresh(dir); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("RemoveFresh left %v", left)
	}

	if err := os.WriteFile(filepath.Join(dir, Marker), []byte(`{"snapshot":"../x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LayeredOn(dir); err == nil {
		t.Fatal("a marker naming no snapshot was taken for a layout")
	}
	for _, n := range []string{volume.ImageName, UpperImage} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, layered, err := LayeredOn(dir); err != nil || layered {
		t.Fatalf("flattened workspace: layered %v, %v", layered, err)
	}
	for _, n := range []string{Marker, UpperImage} {
		if _, err := os.Lstat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Fatalf("a flattened workspace kept %s: %v", n, err)
		}
	}
}

// TestCollectKeepsWhatIsUsed: an image goes only when no sandbox's marker
// names it and the store does not keep it; the markers are read only when
// there are images.
func TestCollectKeepsWhatIsUsed(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var l Lowers
	dir := t.TempDir()
	asked := 0
	named := func() map[string]bool { asked++; return map[string]bool{snapA: true} }
	kept := func(snap string) bool { return snap == snapB }
	l.Collect(filepath.Join(dir, "missing"), named, kept, log)
	if asked != 0 {
		t.Fatalf("with no images the markers were read %d times", asked)
	}
	const gone = "sn00000000000000ff"
	for _, n := range []string{snapA + ".img", snapB + ".img", gone + ".img", gone + ".img.new"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l.Collect(dir, named, kept, log)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{snapA + ".img", snapB + ".img"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}
