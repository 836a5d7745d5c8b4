package execrun

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/outbuf"
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
	t    *Table
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
func (t *Table) sandboxOOMKills() int64 {
	t.mu.Lock()
	g := t.group
	t.mu.Unlock()
	if g != nil {
		if n, err := g.OOMKills(); err == nil {
			return n
		}
	}
	return -1
}

// Spawn starts a process in its own execution group.
func (t *Table) Spawn(ctx context.Context, sp SpawnSpec) (*Proc, error) {
	if len(sp.Argv) == 0 || sp.Argv[0] == "" {
		return nil, fault.InvalidField("argv", "argv is empty")
	}
	if sp.Cwd == "" {
		sp.Cwd = t.host.DefaultCwd()
	}
	if err := agent.CheckPath(sp.Cwd); err != nil {
		return nil, fault.InvalidField("cwd", "cwd must be an absolute, clean path")
	}
	if sp.Sudo && !t.cfg.AllowSudo {
		return nil, errSudo
	}
	env, err := execenv.Build(t.host.BaseEnv(), t.host.NetEnv(sp.Env), sp.PrivilegedEnv, execenv.MaxVars)
	if err != nil {
		return nil, err
	}
	inst, err := t.host.Ensure(ctx)
	if err != nil {
		return nil, err
	}
	slot, home, err := t.Acquire()
	if err != nil {
		return nil, err
	}
	lim := t.host.Limits()
	cpu := sp.CPUTime
	if cpu == 0 {
		cpu = lim.CPUTime
	}
	oom0 := t.sandboxOOMKills()
	p, err := spawnIn(ctx, inst, agent.SpawnReq{
		Argv: sp.Argv, Env: env, Cwd: sp.Cwd, Root: sp.Sudo, TTY: sp.TTY, Rows: sp.Rows, Cols: sp.Cols, Stdin: sp.Stdin,
		DevToolsPipe: sp.DevToolsPipe,
		Limits:       agent.Limits{CPUSeconds: uint64(math.Ceil(cpu.Seconds())), FileSizeBytes: uint64(max(lim.DiskBytes, 0)), OpenFiles: defaultOpenFiles},
	}, slot, home)
	if err != nil {
		t.Kill(slot)
		slot.Dirty = true
		t.Release(slot)
		return nil, spawnfault.Of(err, lim.Pids)
	}
	t.host.Touch()
	proc := &Proc{Process: p, t: t, slot: slot, oom0: oom0}
	t.mu.Lock()
	t.procs[proc] = struct{}{}
	t.mu.Unlock()
	return proc, nil
}

// Kill ends the process's whole tree; after Release it does nothing (the
// execution group may already serve another process).
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.released {
		p.t.Kill(p.slot)
	}
}

// Release kills what is left of the tree, closes the descriptors and frees
// the execution group. Call it once, after the process exited (or to end
// it).
func (p *Proc) Release() {
	p.once.Do(func() {
		p.mu.Lock()
		p.released = true
		p.t.Kill(p.slot)
		// A long-lived process may have left anything behind.
		p.slot.Dirty = true
		p.mu.Unlock()
		p.Close()
		p.t.mu.Lock()
		delete(p.t.procs, p)
		p.t.mu.Unlock()
		p.t.Release(p.slot)
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
	if now := p.t.sandboxOOMKills(); now > p.oom0 {
		st.OOMKills = now - p.oom0
	}
	return st, nil
}

// NewOutput makes a stream of at most limit kept bytes charged to the
// sandbox owner's share of the output budget, for a capability that keeps
// the process's output itself (shell sessions).
func (p *Proc) NewOutput(limit int) *outbuf.Output { return p.t.host.NewOutput(limit) }

// Group is the execution group the process runs in.
func (p *Proc) Group() *execgroup.Group { return p.slot }
