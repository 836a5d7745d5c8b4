package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox/execrun"
)

// freeSlots returns the names of the sandbox's pooled execution groups.
func freeSlots(s *Sandbox) []string {
	var out []string
	for _, sl := range s.execs.Idle() {
		out = append(out, sl.Cgroup.Name())
	}
	return out
}

// TestExecutionGroupIsReusedEmpty: a command's execution group goes back
// to the sandbox's pool when the command ends, and the next command gets
// the same group, empty. It has no memory limit of its own (the sandbox
// group's covers it); on v1 it is not a memory group at all.
func TestExecutionGroupIsReusedEmpty(t *testing.T) {
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
	sl, _, err := s.execs.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if sl.Cgroup.Name() != pooled[0] {
		t.Fatalf("acquired %s, want the pooled %s", sl.Cgroup.Name(), pooled[0])
	}
	procs, err := sl.Cgroup.Procs()
	if err != nil || len(procs) != 0 {
		t.Fatalf("reused group holds %v (%v), want nothing", procs, err)
	}
	if st, err := sl.Cgroup.Stats(); err != nil || (!st.MemoryShared && st.MemoryLimit != 0) {
		t.Fatalf("reused group %+v (%v), want no memory limit of its own", st, err)
	}
	s.execs.Release(sl)
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
	sl, _, err := s.execs.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	dirtyName := sl.Cgroup.Name()
	// A leftover the execution's kill missed: a host process put into
	// the group behind the pool's back.
	leftover := exec.Command("sleep", "300")
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- leftover.Wait() }()
	t.Cleanup(func() { _ = leftover.Process.Kill() })
	if err := sl.Cgroup.AddProc(leftover.Process.Pid); err != nil {
		t.Fatal(err)
	}
	sl.Dirty = true
	s.execs.Release(sl)
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
	next, _, err := s.execs.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer s.execs.Release(next)
	if next.Cgroup.Name() == dirtyName {
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

// TestStartedSandboxHoldsOneExecutionGroup: a started sandbox holds the
// first command's execution group, made beside the init's start (not a
// memory cgroup: TestUserGroupSharesTheSandboxMemoryGroup), and no other;
// the first command runs in it instead of making one, and it is all the
// sandbox keeps afterwards.
func TestStartedSandboxHoldsOneExecutionGroup(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	if pooled := freeSlots(s); len(pooled) != 1 || pooled[0] != "x1" {
		t.Fatalf("execution groups held by a started sandbox: %v, want [x1]", pooled)
	}
	u := s.userGroup()
	if _, err := u.OpenSub("x1"); err != nil {
		t.Fatal("the first execution group does not exist:", err)
	}
	if r := run(t, s, ExecRequest{Command: "true"}); r.Status != StatusCompleted {
		t.Fatalf("first command: %+v", r)
	}
	if _, err := u.OpenSub("x2"); err == nil {
		t.Fatal("the first command made an execution group of its own")
	}
	if pooled := freeSlots(s); len(pooled) != 1 || pooled[0] != "x1" {
		t.Fatalf("execution groups after the first command: %v, want [x1]", pooled)
	}
}

// TestUserGroupSharesTheSandboxMemoryGroup: where the memory controller
// has a v1 hierarchy of its own, the user group and the execution groups
// below it are not memory groups (each would cost the kernel per-shrinker
// state); the sandbox group's limit still covers every process: a balloon
// started with Spawn (the browser's and interpreters' path) is OOM-killed
// at the sandbox's limit, and its Proc says so.
func TestUserGroupSharesTheSandboxMemoryGroup(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	info := m.cg.Info()
	separate := info.Version == 1
	for _, c := range []string{"pids", "cpu", "freezer"} {
		separate = separate && info.Mounts[c] != info.Mounts["memory"]
	}
	if !separate {
		t.Skip("no v1 memory hierarchy of its own here: the user group is a memory group")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs python3 for the balloon")
	}
	s := create(t, m, Spec{Limits: Limits{MemoryBytes: 128 << 20}})
	ust, err := s.userGroup().Stats()
	if err != nil || !ust.MemoryShared {
		t.Fatalf("user group %+v (%v): want it without a memory group of its own", ust, err)
	}
	p, err := s.Spawn(context.Background(), SpawnSpec{Argv: []string{"python3", "-c", "b = bytearray(512 << 20); print(len(b))"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	var ex agent.Exit
	select {
	case ex = <-p.Exited():
	case <-time.After(60 * time.Second):
		t.Fatal("the balloon did not end")
	}
	if ex.Signal != int(syscall.SIGKILL) {
		t.Fatalf("balloon exit %+v, want SIGKILL", ex)
	}
	st, err := p.Stats()
	if err != nil || !st.MemoryShared || st.OOMKills < 1 {
		t.Fatalf("balloon's stats %+v (%v): want an OOM kill counted", st, err)
	}
	gst, err := s.cgroupGroup().Stats()
	if err != nil || gst.OOMKills < 1 || gst.MemoryPeak > 128<<20 {
		t.Fatalf("sandbox group %+v (%v): want the OOM kill under its limit", gst, err)
	}
}

// TestBurstLeavesFewIdleExecutionGroups: a burst of concurrent commands
// makes an execution group each, but the sandbox keeps at most
// execrun.MaxIdleSlots of them once the burst is over; the rest are destroyed.
func TestBurstLeavesFewIdleExecutionGroups(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxExecsPerSandbox = 16
	m := newManager(t, cfg, nil)
	s := create(t, m, Spec{})
	const burst = execrun.MaxIdleSlots + 4
	var wg sync.WaitGroup
	results := make(chan Result, burst)
	// Every command waits until all have started, so the burst is
	// concurrent whatever the load.
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- run(t, s, ExecRequest{Command: fmt.Sprintf("touch /tmp/b%d; while [ $(ls /tmp | grep -c '^b') -lt %d ]; do sleep 0.05; done; echo ok", i, burst), Timeout: 60 * time.Second})
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.Stdout != "ok\n" {
			t.Fatalf("burst command: %+v", r)
		}
	}
	pooled := freeSlots(s)
	if len(pooled) != execrun.MaxIdleSlots {
		t.Fatalf("pooled execution groups after a burst of %d: %v, want %d", burst, pooled, execrun.MaxIdleSlots)
	}
	names, err := s.userGroup().Subs()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != execrun.MaxIdleSlots {
		t.Fatalf("execution groups left below user: %v, want the %d pooled", names, execrun.MaxIdleSlots)
	}
}
