package sandbox

import (
	"fmt"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/ratelimit"
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
// never gets EPIPE. Groups with kept processes are at most maxKeptGroups
// per sandbox; one is reused once it is empty. The copies are
// internal/sandbox/outcopy's.

// maxKeptGroups bounds the execution groups held for kept processes per
// sandbox: each is a cgroup and a few descriptors on the host, and two
// parked readers.
const maxKeptGroups = 8

// checkKeep refuses a keep execution when the sandbox already holds
// maxKeptGroups groups of kept processes (after reusing empty ones).
func (s *Sandbox) checkKeep() error {
	s.pruneKept()
	s.mu.Lock()
	n := len(s.kept)
	s.mu.Unlock()
	if n >= maxKeptGroups {
		return dispatch.CapRefusal(ratelimit.Executions, maxKeptGroups, execCapRetry, fmt.Sprintf(
			"at most %d executions' kept processes per sandbox: end some of them (kill) or run without keep", maxKeptGroups))
	}
	return nil
}

// keepSlot holds an execution group whose processes outlive their call.
func (s *Sandbox) keepSlot(sl *execgroup.Group) {
	s.mu.Lock()
	if s.group == nil || sl.Gen != s.gen {
		s.mu.Unlock()
		sl.Close()
		return
	}
	s.kept = append(s.kept, sl)
	s.mu.Unlock()
}

// pruneKept returns the kept groups whose processes have all exited to
// the pool.
func (s *Sandbox) pruneKept() {
	s.mu.Lock()
	var empty []*execgroup.Group
	kept := s.kept[:0]
	for _, sl := range s.kept {
		if populated, err := sl.Populated(); err == nil && !populated {
			empty = append(empty, sl)
			continue
		}
		kept = append(kept, sl)
	}
	clear(s.kept[len(kept):])
	s.kept = kept
	s.mu.Unlock()
	for _, sl := range empty {
		sl.Dirty = true // checked empty again before it is pooled
		s.releaseSlot(sl)
	}
}

// keptSlots are the groups holding kept processes now.
func (s *Sandbox) keptSlots() []*execgroup.Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*execgroup.Group(nil), s.kept...)
}
