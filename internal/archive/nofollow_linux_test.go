package archive

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenNoFollow covers the race Pack defends against: a name that was a
// file or directory in the listing and is a symlink when opened.
func TestOpenNoFollow(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "lf")))
	must(t, os.Symlink("/etc", filepath.Join(dir, "ld")))
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close() //nolint:errcheck // opened read-only: a close error cannot lose anything
	cases := []struct {
		name    string
		wantDir bool
		ok      bool
	}{
		{"f", false, true},
		{"d", true, true},
		{"lf", false, false},
		{"ld", true, false},
		{"f", true, false}, // a file where a directory was listed
	}
	for _, tc := range cases {
		f, err := openNoFollow(d, tc.name, tc.wantDir)
		if (err == nil) != tc.ok {
			t.Errorf("%s (dir %v): err %v", tc.name, tc.wantDir, err)
		}
		if err != nil && !isLoop(err) {
			t.Errorf("%s: error %v is not recognised as a swapped name", tc.name, err)
		}
		if f != nil {
			_ = f.Close() // opened read-only
		}
	}
}
