package execgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// tasksFile creates dir/tasks below root and opens it under that name.
func tasksFile(t *testing.T, root, dir string) *os.File {
	t.Helper()
	p := filepath.Join(root, dir, "tasks")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p) //nolint:gosec // G304: a test file below t.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestMatchHomePicksTheHierarchiesJoined: the forking thread is sent home
// only in the hierarchies it joined; any attach file without exactly one
// home in its hierarchy falls back to every home file.
func TestMatchHomePicksTheHierarchiesJoined(t *testing.T) {
	r := t.TempDir()
	var home []*os.File
	for _, h := range []string{"cpu,cpuacct", "cpu", "memory", "pids", "freezer"} {
		home = append(home, tasksFile(t, r, h+"/sandhold/sb1"))
	}
	attach := []*os.File{
		tasksFile(t, r, "pids/sandhold/sb1/user/x1"),
		tasksFile(t, r, "cpu/sandhold/sb1/user/x1"),
		tasksFile(t, r, "freezer/sandhold/sb1/user/x1"),
	}
	got := MatchHome(attach, home)
	want := []*os.File{home[3], home[1], home[4]}
	if len(got) != len(want) {
		t.Fatalf("matched %d home files, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("home %d is %s, want %s", i, got[i].Name(), want[i].Name())
		}
	}
	for name, bad := range map[string][]*os.File{
		"a hierarchy without a home":    {attach[0], tasksFile(t, r, "blkio/sandhold/sb1/user/x1")},
		"a group outside the sandbox's": {tasksFile(t, r, "cpu/sandhold/sb2/user/x1")},
		"a sibling named alike":         {tasksFile(t, r, "cpu/sandhold/sb1x/user/x1")},
		"two files in one hierarchy":    {attach[1], tasksFile(t, r, "cpu/sandhold/sb1/user/x2")},
	} {
		if got := MatchHome(bad, home); len(got) != len(home) {
			t.Errorf("%s: %d home files, want all %d", name, len(got), len(home))
		}
	}
}
