package sandbox

import (
	"fmt"
	"os"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
)

// An execution group (internal/sandbox/execgroup) is the cgroup one
// execution runs in, reused from execution to execution; a sandbox keeps
// the empty ones ready (freeSlot) and those holding kept processes
// (keep.go). This file decides when one is handed out, pooled, killed or
// destroyed.

// acquireSlot returns an empty execution group. It has no memory or CPU
// limit of its own: the sandbox group's cover it (on v1 it is not even in
// those hierarchies; see makeGroups).
func (s *Sandbox) acquireSlot() (*execgroup.Group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.group == nil {
		return nil, fault.New(fault.Conflict, "sandbox is not running")
	}
	if len(s.running) >= s.m.cfg.MaxExecsPerSandbox {
		return nil, dispatch.CapRefusal(ratelimit.Executions, s.m.cfg.MaxExecsPerSandbox, execCapRetry, fmt.Sprintf("at most %d concurrent executions per sandbox", s.m.cfg.MaxExecsPerSandbox))
	}
	if n := len(s.freeSlot); n > 0 {
		sl := s.freeSlot[n-1]
		s.freeSlot = s.freeSlot[:n-1]
		sl.Acquired()
		return sl, nil
	}
	s.slotSeq++
	return s.makeSlot(s.user, s.slotSeq, s.gen)
}

// makeSlot makes execution group number seq below user, for init
// generation gen. It takes no lock.
func (s *Sandbox) makeSlot(user cgroup.Group, seq int, gen int) (*execgroup.Group, error) {
	return execgroup.Make(user, seq, gen, s.m.cg.Info().Version == 2)
}

// maxIdleSlots caps the execution groups a sandbox keeps ready. One serves
// commands run one after the other (the common case); a few more serve
// small bursts. Each idle one is a directory in the pids, cpuacct and
// freezer hierarchies (≈19 KB of kernel objects on this project's hosts)
// and four open files, held for as long as the sandbox lives; a
// command beyond them makes its group (≈1.5 ms of kernel CPU) and drops
// it at its end (BenchmarkIdleMemory, TestBurstLeavesFewIdleExecutionGroups).
const maxIdleSlots = 4

// maxFreeSlots is the number of execution groups the sandbox keeps ready:
// maxIdleSlots, or fewer when the sandbox may not run that many at once.
func (s *Sandbox) maxFreeSlots() int { return max(min(s.m.cfg.MaxExecsPerSandbox, maxIdleSlots), 1) }

// releaseSlot returns an execution group its user is done with to the
// sandbox's pool. A slot is pooled only when it is known empty: a clean
// exit (supervise saw no task left), or, for a dirty one (killed, a
// spawn that failed, a long-lived process), a fresh check that no task is
// left. A group that is not empty is destroyed, never handed out: the next
// command would share its accounting and its kill with what is left.
// Nothing inside a sandbox can make sub-groups or change the group's
// limits (cgroupfs is not mounted in a sandbox, and execution groups are
// never delegated), so empty is clean.
func (s *Sandbox) releaseSlot(sl *execgroup.Group) {
	s.firstCommandEnded()
	if sl.Dirty {
		if err := sl.CheckEmpty(); err != nil {
			s.dropSlot(sl, "not empty after its execution", err)
			return
		}
		sl.Dirty = false
	}
	s.mu.Lock()
	if s.group == nil || sl.Gen != s.gen {
		// The sandbox's group (and this child) is gone, or was made
		// again under the same names by a later init.
		s.mu.Unlock()
		sl.Close()
		return
	}
	if len(s.freeSlot) >= s.maxFreeSlots() {
		s.mu.Unlock()
		s.dropSlot(sl, "", nil)
		return
	}
	s.freeSlot = append(s.freeSlot, sl)
	s.mu.Unlock()
}

// dropSlot closes a slot's files and destroys its group (kill, rmdir),
// logging why when it was not simply surplus.
func (s *Sandbox) dropSlot(sl *execgroup.Group, why string, err error) {
	sl.Close()
	s.mu.Lock()
	stopped := s.group == nil
	s.mu.Unlock()
	if stopped {
		return
	}
	s.genMu.RLock() // the check and the destroy, before any next start
	defer s.genMu.RUnlock()
	if sl.Gen != s.gen {
		return
	}
	slotOpHook()
	if why != "" {
		s.m.log.Warn("execution cgroup destroyed instead of reused", "sandbox", s.rec.ID, "group", sl.Cgroup.Name(), "why", why, "err", err)
	}
	if derr := sl.Cgroup.Destroy(); derr != nil {
		s.m.log.Error("destroy execution cgroup", "sandbox", s.rec.ID, "group", sl.Cgroup.Name(), "err", derr)
	}
}

// dropSlots closes every idle execution group's files. Callers hold mu.
func (s *Sandbox) dropSlotsLocked() {
	for _, sl := range s.freeSlot {
		sl.Close()
	}
	for _, sl := range s.kept {
		sl.Close() // their processes died with the init before
	}
	s.freeSlot, s.kept = nil, nil
}

// slotOpHook runs between the generation check and the cgroup operation
// of killSlot and dropSlot: a test's window into the race genMu closes.
var slotOpHook = func() {}

func (s *Sandbox) homeFiles() []*os.File {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.home
}

// homeFor returns the sandbox's home files (homeFiles) the init needs to
// bring its forking thread back after joining a slot's group through
// attach: on v1 only those of the hierarchies attach names. The execution
// group has no directory of its own in some hierarchies (memory: it shares
// the sandbox's), the thread never leaves the sandbox's group there, and a
// write to those tasks files moves nothing. Each attach file must match
// exactly one home file, in the same hierarchy; anything else returns every
// home file, which is what was passed before (the init refuses a spawn with
// fewer home than execution files, so a mismatch cannot leave the thread
// behind). On v2 the home files are passed unchanged (the init does not
// move its thread there).
func (s *Sandbox) homeFor(attach []*os.File) []*os.File {
	home := s.homeFiles()
	if s.m.cg.Info().Version == 2 || len(attach) >= len(home) {
		return home
	}
	return execgroup.MatchHome(attach, home)
}

// oomSince reports whether the OOM killer struck the execution's group,
// or the sandbox as a whole, since last asked. Read only after a SIGKILL:
// it costs a few cgroup file reads.
func (s *Sandbox) oomSince(sl *execgroup.Group) bool {
	hit := sl.OOMSince()
	if g := s.cgroupGroup(); g != nil {
		if st, err := g.Stats(); err == nil {
			s.mu.Lock()
			if st.OOMKills > s.oom {
				hit = true
			}
			s.oom = st.OOMKills
			s.mu.Unlock()
		}
	}
	return hit
}

// killLeftovers kills whatever is still running in the group of an
// execution whose main process ended; a group found populated (or not
// read) is checked again before reuse (releaseSlot).
func (s *Sandbox) killLeftovers(sl *execgroup.Group) {
	if populated, err := sl.Populated(); err != nil || populated {
		s.killSlot(sl)
		sl.Dirty = true
	}
}

// killSlot kills the execution's process tree.
func (s *Sandbox) killSlot(sl *execgroup.Group) {
	s.genMu.RLock() // the check and the kill, before any next start
	defer s.genMu.RUnlock()
	if sl.Gen != s.gen {
		// Its tree died with the init it ran under; the group's name may
		// now be a later execution's.
		return
	}
	slotOpHook()
	if err := sl.Cgroup.Kill(); err != nil {
		s.m.log.Error("kill execution tree", "sandbox", s.rec.ID, "err", err)
	}
}
