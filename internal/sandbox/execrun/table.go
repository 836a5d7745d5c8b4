// Package execrun runs commands in a sandbox, in the server: the execution
// table (running and recently finished executions, long-lived processes),
// the execution groups a sandbox keeps ready for its next commands or
// holds for processes that outlive their command (keep.go), and what an
// execution is limited to. One Table belongs to one sandbox
// (internal/sandbox), which owns the init and its cgroups: it tells the
// table when an init starts and stops (NextGen, Start, Stop), and the
// table asks it for what it needs (Host).
package execrun

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
)

// Host is what a Table needs from its sandbox.
type Host interface {
	// Ensure returns the running init (a stopped sandbox is started by a
	// call of its own, or refused).
	Ensure(ctx context.Context) (*agent.Instance, error)
	// Limits are the sandbox's limits now (a claimed pool sandbox's
	// change).
	Limits() Limits
	// Shell runs a command line; DefaultCwd is where commands start when
	// the caller names no directory.
	Shell() string
	DefaultCwd() string
	// BaseEnv is the environment every command starts from; NetEnv adds
	// the network mode's variables to a caller's.
	BaseEnv() map[string]string
	NetEnv(user map[string]string) map[string]string
	// NewOutput makes a stream charged to the sandbox owner's share of the
	// output budget.
	NewOutput(limit int) *outbuf.Output
	// Touch marks the sandbox used now.
	Touch()
	// FirstCommandEnded runs whenever an execution group is given back.
	FirstCommandEnded()
	// Capped is the refusal of a call over one of the sandbox's caps
	// (limit of them; msg says which): a 429 (dispatch.CapRefusal).
	Capped(limit int, msg string) error
	// Observe counts a finished execution by status; Audit records an
	// event of the sandbox.
	Observe(status string)
	Audit(ctx context.Context, actor, action, verdict string, detail map[string]any)
}

// Limits are the sandbox's limits a command runs under.
type Limits struct {
	// CPUTime caps each execution's process tree's CPU time (0: none).
	CPUTime time.Duration
	// DiskBytes is the workspace quota, each process's file size limit.
	DiskBytes int64
	// Pids is the sandbox's process limit (a spawn's failure names it).
	Pids int64
	// TTL is the sandbox's lifetime (0: none); it bounds a background
	// command that asked for no timeout.
	TTL time.Duration
}

// Config is what does not change over a sandbox's life.
type Config struct {
	// ID is the sandbox's id.
	ID string
	// MaxExecs caps the sandbox's concurrent executions.
	MaxExecs int
	// V2 says the cgroups are version 2.
	V2 bool
	// AllowSudo allows commands as uid 0 inside (SANDBOX_ENABLE_SUDO).
	AllowSudo bool
	Log       *slog.Logger
}

// Table is one sandbox's executions and execution groups.
type Table struct {
	host Host
	cfg  Config

	// mu guards the fields below. Lock order: the sandbox's own lock,
	// then mu, then genMu; the Host is called without mu.
	mu sync.Mutex
	// group and user are the running init's sandbox group and the user
	// group below it (nil while no init runs; Start, Stop); home are the
	// group's thread-attach files, for spawns.
	group, user cgroup.Group
	home        []*os.File
	running     map[string]*Execution // executions not yet finished
	procs       map[*Proc]struct{}    // long-lived processes not yet released
	finished    []*Execution          // oldest first, at most maxFinishedExecs
	byID        map[string]*Execution
	free        []*execgroup.Group // execution groups ready for reuse
	kept        []*execgroup.Group // execution groups holding kept processes (keep.go)
	made        int                // execution groups made under this init
	seq         int                // executions started (their ids)
	oom         int64              // the sandbox group's OOM-kill count last seen
	// gen counts init starts: a slot made under an earlier init (whose
	// cgroup tree is gone, its names reused) is never reused or killed.
	// It is written with both mu and genMu held, so either lock reads it.
	gen int
	// genMu orders operations that reach a cgroup by its path (an
	// execution group's kill or destroy, the sandbox group's destroy at
	// a stop: InGen) against the next init start, which makes the same
	// paths again: such an operation holds it for reading across its
	// check of gen and the operation itself; a start bumps gen holding
	// it for writing before it makes the groups (NextGen). So a late kill
	// of an earlier init's execution group (a revoked key's stream or
	// background command, a shell's release) either ends before the new
	// groups exist or sees itself stale, and never reaches the next
	// init's first command (TestLateSlotKillSparesTheNextInit). Never mu
	// while holding genMu.
	genMu sync.RWMutex
	// opHook, if set, runs between the generation check and the cgroup
	// operation of Kill and dropSlot: a test's window into the race genMu
	// closes (SetOpHook).
	opHook func()
}

// New returns the table of a sandbox whose init is not running.
func New(host Host, cfg Config) *Table {
	return &Table{
		host:    host,
		cfg:     cfg,
		running: make(map[string]*Execution),
		procs:   make(map[*Proc]struct{}),
		byID:    make(map[string]*Execution),
	}
}

// NextGen begins an init start: every execution group of the earlier init
// is stale from now on, and a kill or destroy of one that is under way
// ends first (genMu). It returns the new generation, the one the start's
// execution groups are made under (MakeSlot).
func (t *Table) NextGen() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.genMu.Lock()
	t.gen++
	t.genMu.Unlock()
	return t.gen
}

// MakeSlot makes execution group number seq below user, for init
// generation gen. It takes no lock.
func (t *Table) MakeSlot(user cgroup.Group, seq int, gen int) (*execgroup.Group, error) {
	return execgroup.Make(user, seq, gen, t.cfg.V2)
}

// Start takes the groups of an init that started: its sandbox group, the
// user group below it, the group's thread-attach files (the table closes
// them) and, unless nil, the first execution group, made ahead (it counts
// as the first one made). What was held of an earlier init goes.
func (t *Table) Start(group, user cgroup.Group, home []*os.File, first *execgroup.Group) {
	t.mu.Lock()
	defer t.mu.Unlock()
	execgroup.CloseFiles(t.home)
	t.group, t.user, t.home = group, user, home
	t.dropSlotsLocked()
	t.made = 0
	if first != nil {
		t.free = append(t.free, first)
		t.made = 1
	}
}

// Stop forgets the init's groups (it is gone, or going): the home files
// and the idle and kept execution groups' files are closed. It returns
// the generation they were made under (InGen).
func (t *Table) Stop() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	execgroup.CloseFiles(t.home)
	t.group, t.user, t.home = nil, nil, nil
	t.dropSlotsLocked()
	return t.gen
}

// InGen runs op if no init started since generation gen, before any next
// start can (genMu): the destroy of a stopped init's group, which a later
// start makes again under the same name.
func (t *Table) InGen(gen int, op func()) {
	t.genMu.RLock()
	defer t.genMu.RUnlock()
	if t.gen == gen {
		op()
	}
}

// SetOpHook sets a function run between the generation check and the
// cgroup operation of a kill or destroy of an execution group (nil: none):
// a test's window into the race genMu closes. Set it while nothing runs.
func (t *Table) SetOpHook(f func()) { t.opHook = f }

// Execution returns a running or recently finished execution.
func (t *Table) Execution(id string) (*Execution, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil {
		return nil, fault.New(fault.NotFound, "execution not found")
	}
	return e, nil
}

// Running is how many executions are running.
func (t *Table) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running)
}

// Busy reports whether an execution runs or a long-lived process lives.
func (t *Table) Busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running) > 0 || len(t.procs) > 0
}

// Forget forgets the finished executions and starts the ids again: a pool
// sandbox's warm-up command leaves nothing its owner could find.
func (t *Table) Forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.finished {
		delete(t.byID, e.ID)
	}
	t.finished = nil
	t.seq = 0
}

// KillAll kills every running execution (delete, HALT) and waits
// (bounded) for them to end.
// Long-lived processes (shell sessions, interpreters) die too: their
// owners see the exit and report the lost state.
func (t *Table) KillAll(reason string) {
	t.mu.Lock()
	running := make([]*Execution, 0, len(t.running))
	for _, e := range t.running {
		running = append(running, e)
	}
	procs := make([]*Proc, 0, len(t.procs))
	for p := range t.procs {
		procs = append(procs, p)
	}
	t.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
	cancelAndWait(running, reason)
}

// cancelAndWait kills the executions and waits (bounded, killWait each)
// for them to end.
func cancelAndWait(running []*Execution, reason string) {
	for _, e := range running {
		e.cancel(reason)
	}
	for _, e := range running {
		select {
		case <-e.done:
		case <-time.After(killWait):
		}
	}
}

// KillOf kills the running executions actor started and waits (bounded)
// for them to end; it returns how many it killed.
func (t *Table) KillOf(actor, reason string) int {
	t.mu.Lock()
	var running []*Execution
	for _, e := range t.running {
		if e.actor == actor {
			running = append(running, e)
		}
	}
	t.mu.Unlock()
	cancelAndWait(running, reason)
	return len(running)
}
