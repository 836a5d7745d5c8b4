package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	got := matchHome(attach, home)
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
		if got := matchHome(bad, home); len(got) != len(home) {
			t.Errorf("%s: %d home files, want all %d", name, len(got), len(home))
		}
	}
}

// TestForkingThreadComesHomeInEveryHierarchy: with only the joined
// hierarchies' home files passed, no thread of the init is left in an
// execution group after commands, in any hierarchy, and fewer descriptors
// travel per spawn where the execution group lacks hierarchies.
func TestForkingThreadComesHomeInEveryHierarchy(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	for range 5 {
		if r := run(t, s, ExecRequest{Argv: []string{"/bin/true"}}); r.Status != StatusCompleted {
			t.Fatalf("exec: %+v", r)
		}
	}
	sl, err := s.acquireSlot()
	if err != nil {
		t.Fatal(err)
	}
	home := s.homeFor(sl.attach)
	all := s.homeFiles()
	s.releaseSlot(sl)
	if m.cg.Info().Version != 2 {
		if len(home) != len(sl.attach) {
			t.Fatalf("%d home files for %d execution files (of %d)", len(home), len(sl.attach), len(all))
		}
		t.Logf("%d of %d home files per spawn", len(home), len(all))
	}
	s.mu.Lock()
	pid := s.inst.Pid
	s.mu.Unlock()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	name := sl.g.Name()
	self, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("execution group %s; the init's groups:\n%s", name, self)
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/cgroup")
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.Contains(line, "/"+filepath.Base(name)) && strings.HasSuffix(line, filepath.Base(name)) {
				t.Fatalf("init thread %s is still in execution group %s: %q", task.Name(), name, line)
			}
		}
	}
}
