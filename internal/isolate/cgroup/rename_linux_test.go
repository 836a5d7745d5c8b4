package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRename: a v1 group renamed keeps its tasks (no migration: they are
// listed under the new name), its children and its limits; the old name
// is gone in every hierarchy. A rename onto an existing group fails
// with fs.ErrExist and leaves both as they were. v2 cannot rename.
func TestRename(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		if m.Info().Version == 2 {
			mustCreate(t, m, "v2a", Limits{})
			if _, err := m.Rename("v2a", "v2b"); !errors.Is(err, ErrNoRename) {
				t.Fatalf("v2 rename: %v, want ErrNoRename", err)
			}
			return
		}
		l := Limits{MemoryBytes: 64 << 20, Pids: 9, CPUMilli: 300}
		g := mustCreate(t, m, "spare-1", l)
		c := startIn(t, g, "sleep 60")
		pid := c.cmd.Process.Pid
		before := groupDirs(g)
		if _, err := g.SubSharingLimits("user", Limits{Pids: 5}); err != nil {
			t.Fatal(err)
		}

		for _, bad := range []string{"../x", "", "a/b"} {
			if _, err := m.Rename("spare-1", bad); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Rename to %q: %v, want ErrInvalidName", bad, err)
			}
		}
		other := mustCreate(t, m, "taken", Limits{})
		if _, err := m.Rename("spare-1", "taken"); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("rename onto an existing group: %v, want fs.ErrExist", err)
		}
		for _, d := range append(before, groupDirs(other)...) {
			if _, err := os.Stat(d); err != nil {
				t.Fatalf("after a failed rename: %v", err)
			}
		}

		// A name taken in the last hierarchy only: the renames done in
		// the others are undone.
		dirs := baseDirs(m)
		half := filepath.Join(dirs[len(dirs)-1], "half")
		if err := os.Mkdir(half, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Rename("spare-1", "half"); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("rename onto a name taken in one hierarchy: %v, want fs.ErrExist", err)
		}
		if err := os.Remove(half); err != nil {
			t.Fatal(err)
		}
		for _, d := range before {
			if _, err := os.Stat(d); err != nil {
				t.Fatalf("after a rename undone: %v", err)
			}
		}
		for _, d := range dirs[:len(dirs)-1] {
			if _, err := os.Stat(filepath.Join(d, "half")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a rename undone left %s (%v)", filepath.Join(d, "half"), err)
			}
		}

		r, err := m.Rename("spare-1", "sbrenamed")
		if err != nil {
			t.Fatal(err)
		}
		if r.Name() != "sbrenamed" {
			t.Fatalf("renamed group's name %q", r.Name())
		}
		for _, d := range before {
			if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("old directory %s still there (%v)", d, err)
			}
		}
		if _, err := m.Open("spare-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open of the old name: %v, want ErrNotFound", err)
		}
		base := filepath.Base(baseDirs(m)[0])
		for _, ctrl := range []string{"memory", "pids", "cpu", "freezer"} {
			if got := cgroupOf(t, strconv.Itoa(pid), ctrl); !strings.HasSuffix(got, "/"+base+"/sbrenamed") {
				t.Errorf("%s: the task is in %q after the rename", ctrl, got)
			}
		}
		// The shell, and its sleep once it forked it.
		procs, err := r.Procs()
		if err != nil || !slices.Contains(procs, pid) {
			t.Fatalf("renamed group's procs %v (%v), want %d among them", procs, err, pid)
		}
		st, err := r.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.MemoryLimit != l.MemoryBytes || st.PidsLimit != l.Pids {
			t.Fatalf("limits after the rename: %+v", st)
		}
		if q, err := readString(r.(*v1Group).dir("cpu") + "/cpu.cfs_quota_us"); err != nil || strings.TrimSpace(q) != "30000" {
			t.Fatalf("cpu quota after the rename %q (%v)", q, err)
		}
		us, err := r.OpenSub("user")
		if err != nil {
			t.Fatal(err)
		}
		if st, err := us.Stats(); err != nil || st.PidsLimit != 5 || !st.MemoryShared {
			t.Fatalf("user child after the rename: %+v (%v)", st, err)
		}
		if err := r.Destroy(); err != nil {
			t.Fatal(err)
		}
		if alive(pid) {
			t.Fatal("the renamed group's task survived its Destroy")
		}
	})
}
