package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

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
	sl, home, err := s.execs.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	all := s.execs.Home()
	s.execs.Release(sl)
	if m.cg.Info().Version != 2 {
		if len(home) != len(sl.Attach) {
			t.Fatalf("%d home files for %d execution files (of %d)", len(home), len(sl.Attach), len(all))
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
	name := sl.Cgroup.Name()
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
