package sandbox

import (
	"strconv"
	"strings"
	"testing"
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
