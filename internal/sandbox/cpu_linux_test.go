package sandbox

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
)

// TestExecCPUCountsEveryProcess: an execution's cpu_ms is its group's CPU
// time, so the work of 40 children that the command never waits for
// (each double-forked, reparented to the init) counts, as the CPU-time
// cap already did. Counted from the main process alone (its rusage), the
// 40 children's work was missing.
func TestExecCPUCountsEveryProcess(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{Limits: Limits{Pids: 100}})
	// A fixed amount of work: CPU time, not wall time, is compared.
	const work = `i=0; while [ $i -lt 10000 ]; do i=$((i+1)); done`
	one := run(t, s, ExecRequest{Command: work})
	if one.Status != StatusCompleted || one.CPUMS <= 0 {
		t.Fatalf("one worker: %+v", one)
	}
	const children = 40
	// Each child marks its end in a directory; the command waits for
	// the 40 marks (a condition), never for the children themselves.
	cmd := `d=$(mktemp -d); for n in $(seq ` + strconv.Itoa(children) + `); do ( (` + work + `; touch $d/$n) & ); done; ` +
		`while [ $(ls $d | wc -l) -lt ` + strconv.Itoa(children) + ` ]; do sleep 0.05; done; echo done`
	many := run(t, s, ExecRequest{Command: cmd})
	if many.Status != StatusCompleted || strings.TrimSpace(many.Stdout) != "done" {
		t.Fatalf("40 workers: %+v", many)
	}
	// About 40 times one worker's; half of that leaves room for a loaded
	// machine's noise and is far above the main process's own share.
	if many.CPUMS < children/2*one.CPUMS {
		t.Fatalf("cpu_ms of 40 workers is %d, one worker's %d: the children's CPU time is not counted", many.CPUMS, one.CPUMS)
	}
	t.Logf("cpu_ms: one worker %d, %d workers %d", one.CPUMS, children, many.CPUMS)
}

// TestExecCPUIsItsOwnInAReusedGroup: an execution group is reused, its CPU
// counter cumulative, and an execution's start is taken from the reading
// its group's last execution made at its end (execgroup.Group.IdleCPU) instead of a
// read of its own. Each execution's cpu_ms is still its own: a short
// command after a long one in the same group, and one after a long-lived
// process (Spawn) used that group, which reads no figure at its end.
func TestExecCPUIsItsOwnInAReusedGroup(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	s := create(t, m, Spec{})
	const work = `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done`
	heavy := run(t, s, ExecRequest{Command: work})
	if heavy.Status != StatusCompleted || heavy.CPUMS < 10 {
		t.Fatalf("the work: %+v", heavy)
	}
	free := func() *execgroup.Group {
		t.Helper()
		idle := s.execs.Idle()
		if len(idle) != 1 {
			t.Fatalf("%d idle execution groups, want 1", len(idle))
		}
		return idle[0]
	}
	sl := free()
	if _, known := sl.IdleCPU(); !known {
		t.Fatal("an execution that left its group empty kept no reading for the next")
	}
	light := run(t, s, ExecRequest{Argv: []string{"/bin/true"}})
	if free() != sl {
		t.Fatal("the execution group was not reused")
	}
	if light.Status != StatusCompleted || light.CPUMS*4 > heavy.CPUMS {
		t.Fatalf("cpu_ms after %d ms of work in the same group: %+v", heavy.CPUMS, light)
	}
	// A long-lived process in the same group: its CPU time is its own.
	p, err := s.Spawn(callCtx(t, m), SpawnSpec{Argv: []string{"/bin/bash", "-c", work}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Group() != sl {
		t.Fatal("the process did not take the idle execution group")
	}
	if ex := <-p.Exited(); ex.Code != 0 {
		t.Fatalf("the process: %+v", ex)
	}
	p.Release()
	if _, known := sl.IdleCPU(); free() != sl || known {
		t.Fatalf("after the process: the group reused %v, a reading kept %v", free() == sl, known)
	}
	after := run(t, s, ExecRequest{Argv: []string{"/bin/true"}})
	if after.Status != StatusCompleted || after.CPUMS*4 > heavy.CPUMS {
		t.Fatalf("cpu_ms after a process of %d ms of work in the same group: %+v", heavy.CPUMS, after)
	}
	t.Logf("cpu_ms: the work %d, /bin/true after it %d, after the process %d", heavy.CPUMS, light.CPUMS, after.CPUMS)
}
