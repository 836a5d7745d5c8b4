// Package execgroup holds a sandbox's execution groups: the cgroup below
// the sandbox's user group that one execution (or one long-lived process)
// runs in, reused from execution to execution, with the files that keep
// the hot path from re-reading or re-opening anything. The sandbox's
// execution table decides when a group is handed out, pooled, kept or
// destroyed (internal/sandbox/execrun, slot.go); this package is the group
// and what it reads.
package execgroup

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/cgroup"
)

// Group is one execution group.
type Group struct {
	// Cgroup is the group itself.
	Cgroup cgroup.Group
	// Attach are the files the init needs to place a process in the
	// group, opened once (they stay private to the server and the init).
	Attach []*os.File
	// Gen is the sandbox's init generation the group was made under.
	Gen int
	// Dirty marks a group that was killed or whose last user may have
	// left something in it: the sandbox checks it is empty (CheckEmpty)
	// before it is pooled again.
	Dirty bool

	// probe answers "is anything left in the group?" after every command
	// with one pread (cgroup.Group.OpenProbe).
	probe cgroup.Probe
	// cpu reads the group's CPU time with one pread
	// (cgroup.OpenCPUProbe); nil where it could not be opened
	// (Cgroup.CPUUsage answers then, or says why not).
	cpu *cgroup.CPUProbe
	// oom is the OOM-kill count of the group last seen.
	oom int64
	// cpuStart is the group's CPU time when its current execution
	// started, or -1 if it could not be read (the group is reused, its
	// counter cumulative).
	cpuStart time.Duration
	// idleCPU is the group's CPU time as read at the end of an execution
	// that left the group empty (set only then), kept while the group
	// waits in the sandbox's pool: nothing runs in an empty execution
	// group and nothing can join it from inside the sandbox, so its
	// counter cannot move until the group is used again. Acquired moves
	// it to acquiredCPU for the use it hands the group to (and forgets
	// it, so a use that does not read the counter at its end, a
	// long-lived process, leaves none for the next); MarkCPUStart then
	// takes the start from it instead of reading the file again on the
	// exec's way to the init.
	idleCPU, acquiredCPU cpuReading
}

// cpuReading is an execution group's CPU time read while the group was
// empty, or none (known unset).
type cpuReading struct {
	d     time.Duration
	known bool
}

// Make makes execution group number seq below user, for init generation
// gen. On cgroup v2 (v2 set) the init attaches a process through the
// group's cgroup.procs, opened here as host root; on v1 through its tasks
// files.
func Make(user cgroup.Group, seq, gen int, v2 bool) (*Group, error) {
	g, err := user.Sub("x"+strconv.Itoa(seq), cgroup.Limits{})
	if err != nil {
		return nil, err
	}
	attach, err := attachFiles(g, v2)
	if err != nil {
		_ = g.Destroy()
		return nil, fmt.Errorf("open execution cgroup: %w", err)
	}
	probe, err := g.OpenProbe()
	if err != nil {
		CloseFiles(attach)
		_ = g.Destroy()
		return nil, fmt.Errorf("open execution cgroup: %w", err)
	}
	eg := &Group{Cgroup: g, Attach: attach, probe: probe, Gen: gen}
	if cpu, err := cgroup.OpenCPUProbe(g); err == nil {
		eg.cpu = cpu
	}
	return eg, nil
}

// attachFiles are what the init needs to start a process in g: on v1 the
// tasks files; on v2 the group's cgroup.procs.
func attachFiles(g cgroup.Group, v2 bool) ([]*os.File, error) {
	files, err := g.OpenThreadAttach()
	if err != nil || !v2 {
		return files, err
	}
	defer CloseFiles(files)
	procs := make([]*os.File, 0, len(files))
	for _, dir := range files {
		fd, err := unix.Openat(int(dir.Fd()), "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			CloseFiles(procs)
			return nil, err
		}
		procs = append(procs, os.NewFile(uintptr(fd), "cgroup.procs"))
	}
	return procs, nil
}

// CloseFiles closes every file of fs.
func CloseFiles(fs []*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// Close closes the group's files; the group itself stays.
func (g *Group) Close() {
	CloseFiles(g.Attach)
	if g.probe != nil {
		_ = g.probe.Close()
	}
	if g.cpu != nil {
		_ = g.cpu.Close()
	}
}

// cpuUsage is the group's CPU time now.
func (g *Group) cpuUsage() (time.Duration, error) {
	if g.cpu != nil {
		return g.cpu.Usage()
	}
	return g.Cgroup.CPUUsage()
}

// Populated reports whether a task is left in the group.
func (g *Group) Populated() (bool, error) { return g.probe.Populated() }

// ErrNotEmpty: a released execution group still holds a live task.
var ErrNotEmpty = errors.New("a task is left in the group")

// CheckEmpty tells whether the group holds no live task. The probe
// (pids.current on v1) also counts a killed task until its parent, the
// init, has reaped it; only when it says populated is the group's task
// list read, which lists live tasks only.
func (g *Group) CheckEmpty() error {
	populated, err := g.Populated()
	if err == nil && !populated {
		return nil
	}
	procs, err := g.Cgroup.Procs()
	if err != nil {
		return err
	}
	if len(procs) > 0 {
		return fmt.Errorf("%w: pids %v", ErrNotEmpty, procs)
	}
	return nil
}

// Acquired notes that the group leaves the pool for a new use: the
// reading its last execution kept (IdleCPU) becomes this use's start.
func (g *Group) Acquired() { g.acquiredCPU, g.idleCPU = g.idleCPU, cpuReading{} }

// IdleCPU is the reading the group's last execution kept at its end for
// the next one's start, if it kept one.
func (g *Group) IdleCPU() (time.Duration, bool) { return g.idleCPU.d, g.idleCPU.known }

// MarkCPUStart notes the group's CPU time before an execution starts in
// it: the figure its last execution read at its end when the group has
// been empty since (Acquired), else a read of the group's counter.
func (g *Group) MarkCPUStart() {
	if g.acquiredCPU.known {
		g.cpuStart, g.acquiredCPU = g.acquiredCPU.d, cpuReading{}
		return
	}
	g.cpuStart = -1
	if d, err := g.cpuUsage(); err == nil {
		g.cpuStart = d
	}
}

// CPUStart is the group's CPU time when the current execution started
// (MarkCPUStart), or -1 if it could not be read.
func (g *Group) CPUStart() time.Duration { return g.cpuStart }

// CPUSinceStart is the CPU time of the whole execution: every process
// that ran in its group (children that forked away or were left running
// and killed included), read once its tree is gone. mainOnly, the main
// process's own CPU time (with its waited-for children), stands in where
// the group's counter cannot be read.
//
// With idle set (the execution left nothing in the group, which goes back
// to the pool empty), the figure read is kept as the next execution's
// start (IdleCPU).
func (g *Group) CPUSinceStart(mainOnly time.Duration, idle bool) time.Duration {
	end, err := g.cpuUsage()
	if err != nil {
		return mainOnly
	}
	g.idleCPU = cpuReading{d: end, known: idle}
	if g.cpuStart < 0 || end < g.cpuStart {
		return mainOnly
	}
	return max(end-g.cpuStart, mainOnly)
}

// OOMSince reports whether the OOM killer struck the group since last
// asked. Read only after a SIGKILL: it costs a few cgroup file reads.
func (g *Group) OOMSince() bool {
	st, err := g.Cgroup.Stats()
	if err != nil {
		return false
	}
	hit := st.OOMKills > g.oom
	g.oom = st.OOMKills
	return hit
}

// MatchHome picks, for every v1 tasks file in attach, the one in home
// whose group directory contains it (the same hierarchy: the execution
// group lies below the sandbox's group); it returns home whole if any
// attach file has no such match, or more than one.
func MatchHome(attach, home []*os.File) []*os.File {
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
