package sandbox

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// freeSlots returns the names of the sandbox's pooled execution groups.
func freeSlots(s *Sandbox) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sl := range s.freeSlot {
		out = append(out, sl.g.Name())
	}
	return out
}

// TestExecutionGroupIsReusedEmptyWithFreshLimits: a command's execution
// group goes back to the sandbox's pool when the command ends, the next
// command gets the same group, empty, with the memory limit asked for then.
func TestExecutionGroupIsReusedEmptyWithFreshLimits(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	// A command that leaves a detached child behind: the group is killed
	// when the main process ends, and only then pooled.
	if r := run(t, s, ExecRequest{Command: "setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo started"}); r.Stdout != "started\n" {
		t.Fatalf("exec: %+v", r)
	}
	pooled := freeSlots(s)
	if len(pooled) != 1 {
		t.Fatalf("pooled execution groups %v, want one", pooled)
	}
	sl, err := s.acquireSlot(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if sl.g.Name() != pooled[0] {
		t.Fatalf("acquired %s, want the pooled %s", sl.g.Name(), pooled[0])
	}
	procs, err := sl.g.Procs()
	if err != nil || len(procs) != 0 {
		t.Fatalf("reused group holds %v (%v), want nothing", procs, err)
	}
	if st, err := sl.g.Stats(); err != nil || st.MemoryLimit != 64<<20 {
		t.Fatalf("reused group limits %+v (%v), want memory %d", st, err, 64<<20)
	}
	s.releaseSlot(sl)
	if r := run(t, s, ExecRequest{Command: "echo again"}); r.Stdout != "again\n" {
		t.Fatalf("exec in the reused group: %+v", r)
	}
	if after := freeSlots(s); len(after) != 1 || after[0] != pooled[0] {
		t.Fatalf("pooled groups after reuse %v, want [%s]", after, pooled[0])
	}
}

// TestDirtyExecutionGroupIsNotHandedOut: a group that still holds a task
// when it is given back (a kill that did not finish, a crashed command's
// leftovers) is destroyed, task and all, and the next command gets a new
// group.
func TestDirtyExecutionGroupIsNotHandedOut(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	sl, err := s.acquireSlot(s.rec.Spec.Limits.MemoryBytes)
	if err != nil {
		t.Fatal(err)
	}
	dirtyName := sl.g.Name()
	// A leftover the execution's kill missed: a host process put into
	// the group behind the pool's back.
	leftover := exec.Command("sleep", "300")
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- leftover.Wait() }()
	t.Cleanup(func() { _ = leftover.Process.Kill() })
	if err := sl.g.AddProc(leftover.Process.Pid); err != nil {
		t.Fatal(err)
	}
	sl.dirty = true
	s.releaseSlot(sl)
	if pooled := freeSlots(s); len(pooled) != 0 {
		t.Fatalf("a group holding a task was pooled: %v", pooled)
	}
	select {
	case err := <-exited:
		t.Logf("the dirty group's task ended: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("the dirty group's task survived")
	}
	user := s.userGroup()
	if _, err := user.OpenSub(dirtyName); !errors.Is(err, cgroup.ErrNotFound) {
		t.Fatalf("dirty group %s still exists (%v)", dirtyName, err)
	}
	next, err := s.acquireSlot(s.rec.Spec.Limits.MemoryBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer s.releaseSlot(next)
	if next.g.Name() == dirtyName {
		t.Fatalf("the dirty group's name %s was handed out again", dirtyName)
	}
}

// TestReaperFindsPooledExecutionGroups: pooled execution groups live below
// the sandbox's group, so after a crash of the server the start-up reaper
// removes them with it.
func TestReaperFindsPooledExecutionGroups(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	run(t, s, ExecRequest{Command: "true"})
	pooled := freeSlots(s)
	if len(pooled) != 1 {
		t.Fatalf("pooled execution groups %v, want one", pooled)
	}
	if _, err := s.userGroup().OpenSub(pooled[0]); err != nil {
		t.Fatalf("pooled group: %v", err)
	}
	// What New does on the next start, with this run's sandbox still there
	// (as if the server had died). A dead server's sandbox no longer
	// watches its init: here it would destroy its group when the reap
	// kills the init, racing the reap's own removal of it.
	s.mu.Lock()
	s.inst = nil
	s.mu.Unlock()
	reaped, err := cgroup.Reap(m.cg, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range reaped {
		found = found || n == s.ID()
	}
	if !found {
		t.Fatalf("reaped %v, want the sandbox %s", reaped, s.ID())
	}
	if _, err := m.cg.Open(s.ID()); !errors.Is(err, cgroup.ErrNotFound) {
		t.Fatalf("sandbox group after the reap: %v, want not found", err)
	}
}

// TestIdleSandboxHoldsNoExecutionGroup: a started sandbox that has run
// nothing holds no execution group (each costs an idle sandbox a v1 memory
// cgroup's kernel memory); its first command makes one, which is pooled.
func TestIdleSandboxHoldsNoExecutionGroup(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	if pooled := freeSlots(s); len(pooled) != 0 {
		t.Fatalf("execution groups held by an idle sandbox: %v", pooled)
	}
	u := s.userGroup()
	if _, err := u.OpenSub("x1"); err == nil {
		t.Fatal("an execution group exists before the first command")
	}
	if r := run(t, s, ExecRequest{Command: "true"}); r.Status != StatusCompleted {
		t.Fatalf("first command: %+v", r)
	}
	if pooled := freeSlots(s); len(pooled) != 1 {
		t.Fatalf("execution groups after the first command: %v, want one", pooled)
	}
}
