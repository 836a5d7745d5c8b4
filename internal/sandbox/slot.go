package sandbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// slot is one execution group, reused from execution to execution. It
// keeps what the hot path would otherwise re-read or re-open every time.
type slot struct {
	g cgroup.Group
	// attach are the files the init needs to place a process in g,
	// opened once (they stay private to the server and the init).
	attach []*os.File
	// probe answers "is anything left in g?" after every command with one
	// pread (cgroup.Group.OpenProbe).
	probe cgroup.Probe
	// cpu reads g's CPU time with one pread (cgroup.OpenCPUProbe); nil
	// where it could not be opened (g.CPUUsage answers then, or says
	// why not).
	cpu *cgroup.CPUProbe
	// oom is the OOM-kill count of g last seen.
	oom int64
	// cpuStart is g's CPU time when its current execution started, or
	// -1 if it could not be read (the group is reused, its counter
	// cumulative; see Sandbox.execCPU).
	cpuStart time.Duration
	// idleCPU is g's CPU time as read at the end of an execution that
	// left the group empty (set only then), kept while the slot waits in the
	// pool: nothing runs in an empty execution group and nothing can
	// join it from inside the sandbox, so its counter cannot move until
	// the slot is used again. acquireSlot moves it to acquiredCPU for the
	// use it hands the slot to (and forgets it, so a use that does not
	// read the counter at its end, a long-lived process, leaves none for
	// the next); markCPUStart then takes the start from it instead of
	// reading the file again on the exec's way to the init.
	idleCPU, acquiredCPU cpuReading
	// gen is the sandbox's init generation the slot was made under.
	gen int
	// dirty marks a slot whose group was killed or whose last user may
	// have left something in it: releaseSlot checks it is empty before
	// it is pooled again.
	dirty bool
}

func (sl *slot) close() {
	closeFiles(sl.attach)
	if sl.probe != nil {
		_ = sl.probe.Close()
	}
	if sl.cpu != nil {
		_ = sl.cpu.Close()
	}
}

// cpuUsage is g's CPU time now.
func (sl *slot) cpuUsage() (time.Duration, error) {
	if sl.cpu != nil {
		return sl.cpu.Usage()
	}
	return sl.g.CPUUsage()
}

// populated reports whether a task is left in the slot's group.
func (sl *slot) populated() (bool, error) { return sl.probe.Populated() }

// errNotEmpty: a released execution group still holds a live task.
var errNotEmpty = errors.New("a task is left in the group")

// checkEmpty tells whether the slot's group holds no live task. The probe
// (pids.current on v1) also counts a killed task until its parent, the
// init, has reaped it; only when it says populated is the group's task
// list read, which lists live tasks only.
func (sl *slot) checkEmpty() error {
	populated, err := sl.populated()
	if err == nil && !populated {
		return nil
	}
	procs, err := sl.g.Procs()
	if err != nil {
		return err
	}
	if len(procs) > 0 {
		return fmt.Errorf("%w: pids %v", errNotEmpty, procs)
	}
	return nil
}

// acquireSlot returns an empty execution group. It has no memory or CPU
// limit of its own: the sandbox group's cover it (on v1 it is not even in
// those hierarchies; see makeGroups).
func (s *Sandbox) acquireSlot() (*slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.group == nil {
		return nil, fault.New(fault.Conflict, "sandbox is not running")
	}
	if len(s.running) >= s.m.cfg.MaxExecsPerSandbox {
		return nil, capFault(ratelimit.Executions, s.m.cfg.MaxExecsPerSandbox, execCapRetry, fmt.Sprintf("at most %d concurrent executions per sandbox", s.m.cfg.MaxExecsPerSandbox))
	}
	if n := len(s.freeSlot); n > 0 {
		sl := s.freeSlot[n-1]
		s.freeSlot = s.freeSlot[:n-1]
		sl.acquiredCPU, sl.idleCPU = sl.idleCPU, cpuReading{}
		return sl, nil
	}
	s.slotSeq++
	return s.makeSlot(s.user, s.slotSeq, s.gen)
}

// makeSlot makes execution group number seq below user, for init
// generation gen. It takes no lock.
func (s *Sandbox) makeSlot(user cgroup.Group, seq int, gen int) (*slot, error) {
	g, err := user.Sub("x"+strconv.Itoa(seq), cgroup.Limits{})
	if err != nil {
		return nil, err
	}
	attach, err := s.attachFiles(g)
	if err != nil {
		_ = g.Destroy()
		return nil, fmt.Errorf("open execution cgroup: %w", err)
	}
	probe, err := g.OpenProbe()
	if err != nil {
		closeFiles(attach)
		_ = g.Destroy()
		return nil, fmt.Errorf("open execution cgroup: %w", err)
	}
	sl := &slot{g: g, attach: attach, probe: probe, gen: gen}
	if cpu, err := cgroup.OpenCPUProbe(g); err == nil {
		sl.cpu = cpu
	}
	return sl, nil
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
func (s *Sandbox) releaseSlot(sl *slot) {
	s.firstCommandEnded()
	if sl.dirty {
		if err := sl.checkEmpty(); err != nil {
			s.dropSlot(sl, "not empty after its execution", err)
			return
		}
		sl.dirty = false
	}
	s.mu.Lock()
	if s.group == nil || sl.gen != s.gen {
		// The sandbox's group (and this child) is gone, or was made
		// again under the same names by a later init.
		s.mu.Unlock()
		sl.close()
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
func (s *Sandbox) dropSlot(sl *slot, why string, err error) {
	sl.close()
	s.mu.Lock()
	stopped := s.group == nil
	s.mu.Unlock()
	if stopped {
		return
	}
	s.genMu.RLock() // the check and the destroy, before any next start
	defer s.genMu.RUnlock()
	if sl.gen != s.gen {
		return
	}
	slotOpHook()
	if why != "" {
		s.m.log.Warn("execution cgroup destroyed instead of reused", "sandbox", s.rec.ID, "group", sl.g.Name(), "why", why, "err", err)
	}
	if derr := sl.g.Destroy(); derr != nil {
		s.m.log.Error("destroy execution cgroup", "sandbox", s.rec.ID, "group", sl.g.Name(), "err", derr)
	}
}

// dropSlots closes every idle execution group's files. Callers hold mu.
func (s *Sandbox) dropSlotsLocked() {
	for _, sl := range s.freeSlot {
		sl.close()
	}
	for _, sl := range s.kept {
		sl.close() // their processes died with the init before
	}
	s.freeSlot, s.kept = nil, nil
}

// slotOpHook runs between the generation check and the cgroup operation
// of killSlot and dropSlot: a test's window into the race genMu closes.
var slotOpHook = func() {}

// attachFiles are what the init needs to start a process in g: on v1 the
// tasks files; on v2 the group's cgroup.procs, opened here as host root.
func (s *Sandbox) attachFiles(g cgroup.Group) ([]*os.File, error) {
	files, err := g.OpenThreadAttach()
	if err != nil || s.m.cg.Info().Version != 2 {
		return files, err
	}
	defer closeFiles(files)
	procs := make([]*os.File, 0, len(files))
	for _, dir := range files {
		fd, err := unix.Openat(int(dir.Fd()), "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeFiles(procs)
			return nil, err
		}
		procs = append(procs, os.NewFile(uintptr(fd), "cgroup.procs"))
	}
	return procs, nil
}

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
	return matchHome(attach, home)
}

// matchHome picks, for every v1 tasks file in attach, the one in home
// whose group directory contains it (the same hierarchy: the execution
// group lies below the sandbox's group); it returns home whole if any
// attach file has no such match, or more than one.
func matchHome(attach, home []*os.File) []*os.File {
	out := make([]*os.File, 0, len(attach))
	for _, a := range attach {
		var match *os.File
		for _, h := range home {
			dir := strings.TrimSuffix(h.Name(), "/tasks")
			if dir == h.Name() || !strings.HasSuffix(a.Name(), "/tasks") || !strings.HasPrefix(a.Name(), dir+"/") {
				continue
			}
			if match != nil {
				return home
			}
			match = h
		}
		if match == nil || slices.Contains(out, match) {
			return home
		}
		out = append(out, match)
	}
	return out
}

// oomSince reports whether the OOM killer struck the execution's group,
// or the sandbox as a whole, since last asked. Read only after a SIGKILL:
// it costs a few cgroup file reads.
func (s *Sandbox) oomSince(sl *slot) bool {
	hit := false
	if st, err := sl.g.Stats(); err == nil {
		hit = st.OOMKills > sl.oom
		sl.oom = st.OOMKills
	}
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

// markCPUStart notes the group's CPU time before an execution starts in
// it: the figure its last execution read at its end when the group has
// been empty since (idleCPU), else a read of the group's counter.
func (sl *slot) markCPUStart() {
	if sl.acquiredCPU.known {
		sl.cpuStart, sl.acquiredCPU = sl.acquiredCPU.d, cpuReading{}
		return
	}
	sl.cpuStart = -1
	if d, err := sl.cpuUsage(); err == nil {
		sl.cpuStart = d
	}
}

// cpuSinceStart is the CPU time of the whole execution: every process
// that ran in its group (children that forked away or were left running
// and killed included), read once its tree is gone. mainOnly, the main
// process's own CPU time (with its waited-for children), stands in where
// the group's counter cannot be read.
//
// With idle set (the execution left nothing in the group, which goes back
// to the pool empty), the figure read is kept as the next execution's
// start (idleCPU).
func (sl *slot) cpuSinceStart(mainOnly time.Duration, idle bool) time.Duration {
	end, err := sl.cpuUsage()
	if err != nil {
		return mainOnly
	}
	sl.idleCPU = cpuReading{d: end, known: idle}
	if sl.cpuStart < 0 || end < sl.cpuStart {
		return mainOnly
	}
	return max(end-sl.cpuStart, mainOnly)
}

// killLeftovers kills whatever is still running in the group of an
// execution whose main process ended; a group found populated (or not
// read) is checked again before reuse (releaseSlot).
func (s *Sandbox) killLeftovers(sl *slot) {
	if populated, err := sl.populated(); err != nil || populated {
		s.killSlot(sl)
		sl.dirty = true
	}
}

// killSlot kills the execution's process tree.
func (s *Sandbox) killSlot(sl *slot) {
	s.genMu.RLock() // the check and the kill, before any next start
	defer s.genMu.RUnlock()
	if sl.gen != s.gen {
		// Its tree died with the init it ran under; the group's name may
		// now be a later execution's.
		return
	}
	slotOpHook()
	if err := sl.g.Kill(); err != nil {
		s.m.log.Error("kill execution tree", "sandbox", s.rec.ID, "err", err)
	}
}

// cpuReading is an execution group's CPU time read while the group was
// empty, or none (known unset).
type cpuReading struct {
	d     time.Duration
	known bool
}
