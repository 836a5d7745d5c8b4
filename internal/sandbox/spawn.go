package sandbox

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/sandbox/execenv"
	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
	"github.com/sandhold/sandhold/internal/sandbox/spawnfault"
)

// SpawnSpec starts a long-lived process for a capability that manages its
// own I/O (PTY shells, interpreters, the browser): the caller owns the
// descriptors and the lifetime, the sandbox owns placement and limits.
type SpawnSpec struct {
	Argv []string
	Cwd  string
	Env  map[string]string
	// PrivilegedEnv allows LD_PRELOAD and friends (admin keys).
	PrivilegedEnv bool
	TTY           bool
	Rows, Cols    uint16
	Stdin         bool
	Sudo          bool
	// CPUTime caps each process's CPU time (0: the sandbox's limit).
	CPUTime time.Duration
	// DevToolsPipe gives the process Chromium's --remote-debugging-pipe
	// descriptors (3 and 4); the server's ends are Proc.DevToolsIn and
	// DevToolsOut (agent.SpawnReq.DevToolsPipe).
	DevToolsPipe bool
}

// Proc is a process started with Spawn. Kill ends its whole tree; Release
// must be called once it has exited (it frees the execution group).
type Proc struct {
	*agent.Process
	s    *Sandbox
	slot *execgroup.Group
	once sync.Once

	// mu orders Kill against Release: once released, the slot may be
	// another process's, so a late Kill must not touch it.
	mu       sync.Mutex
	released bool
	// oom0 is the sandbox group's OOM-kill count before the spawn (-1:
	// unknown), for Stats when the execution group has no memory group of
	// its own.
	oom0 int64
}

// sandboxOOMKills reads the sandbox group's OOM-kill count (-1 if it
// cannot be read).
func (s *Sandbox) sandboxOOMKills() int64 {
	if g := s.cgroupGroup(); g != nil {
		if n, err := g.OOMKills(); err == nil {
			return n
		}
	}
	return -1
}

// Spawn starts a process in its own execution group.
func (s *Sandbox) Spawn(ctx context.Context, sp SpawnSpec) (*Proc, error) {
	if len(sp.Argv) == 0 || sp.Argv[0] == "" {
		return nil, fault.InvalidField("argv", "argv is empty")
	}
	if sp.Cwd == "" {
		sp.Cwd = s.defaultCwd()
	}
	if err := agent.CheckPath(sp.Cwd); err != nil {
		return nil, fault.InvalidField("cwd", "cwd must be an absolute, clean path")
	}
	if sp.Sudo && !s.m.cfg.AllowSudo {
		return nil, fault.New(fault.Forbidden, "sudo is not enabled on this server (SANDBOX_ENABLE_SUDO)")
	}
	env, err := execenv.Build(s.baseEnv(), s.netEnv(sp.Env), sp.PrivilegedEnv, execenv.MaxVars)
	if err != nil {
		return nil, err
	}
	inst, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	slot, err := s.acquireSlot()
	if err != nil {
		return nil, err
	}
	cpu := sp.CPUTime
	if cpu == 0 {
		cpu = s.rec.Spec.Limits.CPUTime
	}
	oom0 := s.sandboxOOMKills()
	p, err := s.spawnIn(ctx, inst, agent.SpawnReq{
		Argv: sp.Argv, Env: env, Cwd: sp.Cwd, Root: sp.Sudo, TTY: sp.TTY, Rows: sp.Rows, Cols: sp.Cols, Stdin: sp.Stdin,
		DevToolsPipe: sp.DevToolsPipe,
		Limits:       agent.Limits{CPUSeconds: uint64(math.Ceil(cpu.Seconds())), FileSizeBytes: uint64(max(s.rec.Spec.Limits.DiskBytes, 0)), OpenFiles: defaultOpenFiles},
	}, slot)
	if err != nil {
		s.killSlot(slot)
		slot.Dirty = true
		s.releaseSlot(slot)
		return nil, spawnfault.Of(err, s.rec.Spec.Limits.Pids)
	}
	s.touch()
	proc := &Proc{Process: p, s: s, slot: slot, oom0: oom0}
	s.mu.Lock()
	s.procs[proc] = struct{}{}
	s.mu.Unlock()
	return proc, nil
}

// Kill ends the process's whole tree; after Release it does nothing (the
// execution group may already serve another process).
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.released {
		p.s.killSlot(p.slot)
	}
}

// Release kills what is left of the tree, closes the descriptors and frees
// the execution group. Call it once, after the process exited (or to end
// it).
func (p *Proc) Release() {
	p.once.Do(func() {
		p.mu.Lock()
		p.released = true
		p.s.killSlot(p.slot)
		// A long-lived process may have left anything behind.
		p.slot.Dirty = true
		p.mu.Unlock()
		p.Close()
		p.s.mu.Lock()
		delete(p.s.procs, p)
		p.s.mu.Unlock()
		p.s.releaseSlot(p.slot)
	})
}

// Stats reports the process tree's cgroup figures. Where its execution
// group shares the sandbox's memory group (v1), OOM kills are counted
// there: OOMKills is then the sandbox's kills since the process started,
// which includes any other process of the sandbox killed meanwhile.
func (p *Proc) Stats() (cgroup.Stats, error) {
	st, err := p.slot.Cgroup.Stats()
	if err != nil || !st.MemoryShared || p.oom0 < 0 {
		return st, err
	}
	if now := p.s.sandboxOOMKills(); now > p.oom0 {
		st.OOMKills = now - p.oom0
	}
	return st, nil
}
