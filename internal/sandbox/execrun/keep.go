package execrun

import (
	"fmt"

	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
)

// Processes that outlive their execution (ExecRequest.Keep).
//
// A one-shot execution ends what it started: when its main process exits,
// whatever it left running in its execution group is killed, so
// `nohup python3 -m http.server 8000 &` dies with the call. With keep, an
// execution whose main process exits on its own (not killed, not timed
// out) leaves its group as it is: the processes in it run on, within the
// sandbox's limits (pids, memory, CPU time per process), until they exit,
// something in the sandbox kills them, or the sandbox stops or is deleted.
// The call answers when the main process has exited and everything it
// wrote is read: the output streams are read through the runtime's poller,
// and at the main process's exit a read deadline makes each copy read what
// the pipe holds then (all the main process and what it waited for wrote)
// and finish the call's output; from then on the streams are read into
// nothing, so a kept process that writes never blocks on a full pipe and
// never gets EPIPE. Groups with kept processes are at most MaxKeptGroups
// per sandbox; one is reused once it is empty. The copies are
// internal/sandbox/outcopy's.

// MaxKeptGroups bounds the execution groups held for kept processes per
// sandbox: each is a cgroup and a few descriptors on the host, and two
// parked readers.
const MaxKeptGroups = 8

// checkKeep refuses a keep execution when the sandbox already holds
// MaxKeptGroups groups of kept processes (after reusing empty ones).
func (t *Table) checkKeep() error {
	t.PruneKept()
	t.mu.Lock()
	n := len(t.kept)
	t.mu.Unlock()
	if n >= MaxKeptGroups {
		return t.host.Capped(MaxKeptGroups, fmt.Sprintf(
			"at most %d executions' kept processes per sandbox: end some of them (kill) or run without keep", MaxKeptGroups))
	}
	return nil
}

// keepSlot holds an execution group whose processes outlive their call.
func (t *Table) keepSlot(sl *execgroup.Group) {
	t.mu.Lock()
	if t.group == nil || sl.Gen != t.gen {
		t.mu.Unlock()
		sl.Close()
		return
	}
	t.kept = append(t.kept, sl)
	t.mu.Unlock()
}

// PruneKept returns the kept groups whose processes have all exited to
// the pool.
func (t *Table) PruneKept() {
	t.mu.Lock()
	var empty []*execgroup.Group
	kept := t.kept[:0]
	for _, sl := range t.kept {
		if populated, err := sl.Populated(); err == nil && !populated {
			empty = append(empty, sl)
			continue
		}
		kept = append(kept, sl)
	}
	clear(t.kept[len(kept):])
	t.kept = kept
	t.mu.Unlock()
	for _, sl := range empty {
		sl.Dirty = true // checked empty again before it is pooled
		t.Release(sl)
	}
}

// Kept are the groups holding kept processes now.
func (t *Table) Kept() []*execgroup.Group {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*execgroup.Group(nil), t.kept...)
}
