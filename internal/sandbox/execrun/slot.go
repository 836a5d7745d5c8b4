package execrun

import (
	"fmt"
	"os"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
)

// An execution group (internal/sandbox/execgroup) is the cgroup one
// execution runs in, reused from execution to execution; a table keeps
// the empty ones ready (free) and those holding kept processes (keep.go).
// This file decides when one is handed out, pooled, killed or destroyed.

// Acquire returns an empty execution group and the sandbox's home files
// for it (homeFor). It has no memory or CPU limit of its own: the sandbox
// group's cover it (on v1 it is not even in those hierarchies; see the
// sandbox's makeGroups).
func (t *Table) Acquire() (*execgroup.Group, []*os.File, error) {
	t.mu.Lock()
	if t.group == nil {
		t.mu.Unlock()
		return nil, nil, fault.New(fault.Conflict, "sandbox is not running")
	}
	if len(t.running) >= t.cfg.MaxExecs {
		t.mu.Unlock()
		return nil, nil, t.host.Capped(t.cfg.MaxExecs, fmt.Sprintf("at most %d concurrent executions per sandbox", t.cfg.MaxExecs))
	}
	home := t.home
	if n := len(t.free); n > 0 {
		sl := t.free[n-1]
		t.free = t.free[:n-1]
		t.mu.Unlock()
		sl.Acquired()
		return sl, t.homeFor(sl.Attach, home), nil
	}
	t.made++
	sl, err := t.MakeSlot(t.user, t.made, t.gen)
	t.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	return sl, t.homeFor(sl.Attach, home), nil
}

// MaxIdleSlots caps the execution groups a sandbox keeps ready. One serves
// commands run one after the other (the common case); a few more serve
// small bursts. Each idle one is a directory in the pids, cpuacct and
// freezer hierarchies (≈19 KB of kernel objects on this project's hosts)
// and four open files, held for as long as the sandbox lives; a
// command beyond them makes its group (≈1.5 ms of kernel CPU) and drops
// it at its end (BenchmarkIdleMemory, TestBurstLeavesFewIdleExecutionGroups).
const MaxIdleSlots = 4

// maxIdle is the number of execution groups the table keeps ready:
// MaxIdleSlots, or fewer when the sandbox may not run that many at once.
func (t *Table) maxIdle() int { return max(min(t.cfg.MaxExecs, MaxIdleSlots), 1) }

// Release returns an execution group its user is done with to the
// table's pool. A slot is pooled only when it is known empty: a clean
// exit (supervise saw no task left), or, for a dirty one (killed, a
// spawn that failed, a long-lived process), a fresh check that no task is
// left. A group that is not empty is destroyed, never handed out: the next
// command would share its accounting and its kill with what is left.
// Nothing inside a sandbox can make sub-groups or change the group's
// limits (cgroupfs is not mounted in a sandbox, and execution groups are
// never delegated), so empty is clean.
func (t *Table) Release(sl *execgroup.Group) {
	t.host.FirstCommandEnded()
	if sl.Dirty {
		if err := sl.CheckEmpty(); err != nil {
			t.dropSlot(sl, "not empty after its execution", err)
			return
		}
		sl.Dirty = false
	}
	t.mu.Lock()
	if t.group == nil || sl.Gen != t.gen {
		// The sandbox's group (and this child) is gone, or was made
		// again under the same names by a later init.
		t.mu.Unlock()
		sl.Close()
		return
	}
	if len(t.free) >= t.maxIdle() {
		t.mu.Unlock()
		t.dropSlot(sl, "", nil)
		return
	}
	t.free = append(t.free, sl)
	t.mu.Unlock()
}

// dropSlot closes a slot's files and destroys its group (kill, rmdir),
// logging why when it was not simply surplus.
func (t *Table) dropSlot(sl *execgroup.Group, why string, err error) {
	sl.Close()
	t.mu.Lock()
	stopped := t.group == nil
	t.mu.Unlock()
	if stopped {
		return
	}
	t.genMu.RLock() // the check and the destroy, before any next start
	defer t.genMu.RUnlock()
	if sl.Gen != t.gen {
		return
	}
	if t.opHook != nil {
		t.opHook()
	}
	if why != "" {
		t.cfg.Log.Warn("execution cgroup destroyed instead of reused", "sandbox", t.cfg.ID, "group", sl.Cgroup.Name(), "why", why, "err", err)
	}
	if derr := sl.Cgroup.Destroy(); derr != nil {
		t.cfg.Log.Error("destroy execution cgroup", "sandbox", t.cfg.ID, "group", sl.Cgroup.Name(), "err", derr)
	}
}

// dropSlotsLocked closes every idle execution group's files. Callers hold
// mu.
func (t *Table) dropSlotsLocked() {
	for _, sl := range t.free {
		sl.Close()
	}
	for _, sl := range t.kept {
		sl.Close() // their processes died with the init before
	}
	t.free, t.kept = nil, nil
}

// Idle are the execution groups kept ready now.
func (t *Table) Idle() []*execgroup.Group {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*execgroup.Group(nil), t.free...)
}

// Made is how many execution groups were made under the running init.
func (t *Table) Made() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.made
}

// Home are the sandbox group's thread-attach files.
func (t *Table) Home() []*os.File {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.home
}

// homeFor returns of the sandbox's home files (home) those the init needs
// to bring its forking thread back after joining a slot's group through
// attach: on v1 only those of the hierarchies attach names. The execution
// group has no directory of its own in some hierarchies (memory: it shares
// the sandbox's), the thread never leaves the sandbox's group there, and a
// write to those tasks files moves nothing. Each attach file must match
// exactly one home file, in the same hierarchy; anything else returns every
// home file, which is what was passed before (the init refuses a spawn with
// fewer home than execution files, so a mismatch cannot leave the thread
// behind). On v2 the home files are passed unchanged (the init does not
// move its thread there).
func (t *Table) homeFor(attach, home []*os.File) []*os.File {
	if t.cfg.V2 || len(attach) >= len(home) {
		return home
	}
	return execgroup.MatchHome(attach, home)
}

// oomSince reports whether the OOM killer struck the execution's group,
// or the sandbox as a whole, since last asked. Read only after a SIGKILL:
// it costs a few cgroup file reads.
func (t *Table) oomSince(sl *execgroup.Group) bool {
	hit := sl.OOMSince()
	t.mu.Lock()
	g := t.group
	t.mu.Unlock()
	if g != nil {
		if st, err := g.Stats(); err == nil {
			t.mu.Lock()
			if st.OOMKills > t.oom {
				hit = true
			}
			t.oom = st.OOMKills
			t.mu.Unlock()
		}
	}
	return hit
}

// killLeftovers kills whatever is still running in the group of an
// execution whose main process ended; a group found populated (or not
// read) is checked again before reuse (Release).
func (t *Table) killLeftovers(sl *execgroup.Group) {
	if populated, err := sl.Populated(); err != nil || populated {
		t.Kill(sl)
		sl.Dirty = true
	}
}

// Kill kills the process tree in an execution group.
func (t *Table) Kill(sl *execgroup.Group) {
	t.genMu.RLock() // the check and the kill, before any next start
	defer t.genMu.RUnlock()
	if sl.Gen != t.gen {
		// Its tree died with the init it ran under; the group's name may
		// now be a later execution's.
		return
	}
	if t.opHook != nil {
		t.opHook()
	}
	if err := sl.Cgroup.Kill(); err != nil {
		t.cfg.Log.Error("kill execution tree", "sandbox", t.cfg.ID, "err", err)
	}
}
