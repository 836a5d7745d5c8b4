package execrun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/sandbox/execenv"
	"github.com/sandhold/sandhold/internal/sandbox/execgroup"
	"github.com/sandhold/sandhold/internal/sandbox/outcopy"
	"github.com/sandhold/sandhold/internal/sandbox/spawnfault"
)

// Execution limits and defaults (SECURITY-RULES.md → Exec).
const (
	DefaultTimeout = 60 * time.Second
	MaxTimeout     = 600 * time.Second
	// DefaultOutputLimit is kept per stream (AIO's bash pipe default).
	DefaultOutputLimit = 50_000
	// MaxOutputLimit caps a caller's output_limit: the kept bytes live in
	// server memory.
	MaxOutputLimit = 10 << 20
	// MaxStdin caps the stdin a request may carry.
	MaxStdin = 10 << 20
	// defaultOpenFiles is RLIMIT_NOFILE of every execution.
	defaultOpenFiles = 1024
	// maxCommandBytes caps a command line.
	maxCommandBytes = 128 << 10
	// drainGrace bounds waiting for output after the process tree is dead:
	// only a descriptor passed to another execution keeps a pipe open.
	drainGrace = 2 * time.Second
	// cpuPoll is how often a long execution's tree CPU time is checked.
	cpuPoll = 250 * time.Millisecond
	// exitAfterKill bounds waiting for the exit report of a killed
	// execution; past it the init is presumed gone and the exit is
	// recorded as SIGKILL.
	exitAfterKill = 10 * time.Second
	// killWait bounds waiting for each killed execution to finish when a
	// sandbox stops or HALT kills everything.
	killWait = 15 * time.Second
	// maxFinishedExecs is how many finished executions a sandbox keeps for
	// polling before the oldest is forgotten.
	maxFinishedExecs = 256
)

// Statuses of an execution.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusTimedOut  = "timed_out"
	StatusKilled    = "killed"
)

// Reasons an execution was killed.
const (
	ReasonMemory  = "memory"
	ReasonCPU     = "cpu_time"
	ReasonTimeout = "timeout"
	ReasonClient  = "client"
)

// ExecRequest is one command to run.
type ExecRequest struct {
	// Command is run with /bin/bash -c; Argv is run as is. One of them.
	Command string
	Argv    []string
	Cwd     string
	Env     map[string]string
	// Timeout is the wall limit; 0 is DefaultTimeout, or none for a
	// Background command in a sandbox with a TTL (Check).
	Timeout time.Duration
	Stdin   []byte
	// Sudo runs as uid 0 inside the namespace (needs SANDBOX_ENABLE_SUDO).
	Sudo bool
	// OutputLimit is the bytes kept per stream (0: DefaultOutputLimit).
	OutputLimit int
	// PrivilegedEnv allows LD_PRELOAD and friends (admin keys).
	PrivilegedEnv bool
	// Background returns at once; the execution is polled by id.
	Background bool
	// Keep lets what the command leaves running outlive it (keep.go):
	// without it, the end of the main process kills its whole group.
	Keep  bool
	Actor string
}

// Execution is a command started in a sandbox.
type Execution struct {
	ID      string
	Sandbox string
	Argv    []string
	Started time.Time
	Stdout  *outbuf.Output
	Stderr  *outbuf.Output

	cancel func(reason string)
	done   chan struct{}
	// actor is the key that started it (revocation kills its executions).
	actor string

	// mu guards the result.
	mu       sync.Mutex
	status   string
	reason   string
	exitCode int
	signal   int
	kept     bool
	duration time.Duration
	cpu      time.Duration
}

// Result is a finished (or running) execution's outcome.
type Result struct {
	ID         string `json:"command_id"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`
	ExitCode   *int   `json:"exit_code"`
	Signal     int    `json:"signal,omitempty"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	CPUMS      int64  `json:"cpu_ms"`
	// Kept says processes the command started run on (keep).
	Kept bool `json:"kept,omitempty"`
}

// OutputGone answers a read of the execution's output from these offsets:
// a gone fault (410) when the bytes asked for were evicted by the output
// budget (SANDBOX_OUTPUT_BUDGET, SANDBOX_OUTPUT_BUDGET_PER_KEY), else nil.
// Offsets at or past a stream's end ask for nothing it lost.
func (e *Execution) OutputGone(stdoutOffset, stderrOffset int64) error {
	if err := e.Stdout.Gone("stdout", e.ID, stdoutOffset); err != nil {
		return err
	}
	return e.Stderr.Gone("stderr", e.ID, stderrOffset)
}

// Done is closed when the execution has finished.
func (e *Execution) Done() <-chan struct{} { return e.done }

// Kill ends the execution's whole process tree.
func (e *Execution) Kill() { e.cancel(ReasonClient) }

// Status reports the current status.
func (e *Execution) Status() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}

// Result returns the outcome so far.
func (e *Execution) Result() Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	out, t1 := e.Stdout.Text()
	errOut, t2 := e.Stderr.Text()
	r := Result{
		ID: e.ID, Status: e.status, Reason: e.reason, Signal: e.signal,
		Stdout: out, Stderr: errOut, Truncated: t1 || t2,
		DurationMS: e.duration.Milliseconds(), CPUMS: e.cpu.Milliseconds(), Kept: e.kept,
	}
	if e.status == StatusRunning {
		r.DurationMS = time.Since(e.Started).Milliseconds()
	} else {
		code := e.exitCode
		r.ExitCode = &code
	}
	return r
}

// ErrTimeout refuses a wall timeout outside CheckTimeout's range (and
// one that is not a number).
var ErrTimeout = fault.InvalidField("timeout", fmt.Sprintf("timeout must be a number of seconds in (0, %d]", int(MaxTimeout.Seconds())))

// CheckTimeout is the one rule of an execution's wall timeout: above zero
// and at most MaxTimeout. exec.run's arguments are checked with it, and
// Table.Exec applies it again for callers that do not come through the
// dispatcher.
func CheckTimeout(d time.Duration) error {
	if d <= 0 || d > MaxTimeout {
		return ErrTimeout
	}
	return nil
}

// Check validates a request and fills defaults; it returns the argv and
// the environment the command runs with.
func (t *Table) Check(r *ExecRequest) ([]string, []string, error) {
	switch {
	case r.Command != "" && len(r.Argv) > 0:
		return nil, nil, fault.InvalidField("command", "give command or argv, not both")
	case r.Command == "" && len(r.Argv) == 0:
		return nil, nil, fault.InvalidField("command", "command or argv is required")
	case len(r.Command) > maxCommandBytes:
		return nil, nil, fault.InvalidField("command", fmt.Sprintf("command longer than %d bytes", maxCommandBytes))
	case strings.IndexByte(r.Command, 0) >= 0:
		return nil, nil, fault.InvalidField("command", "command holds a NUL byte")
	}
	argv := r.Argv
	if r.Command != "" {
		argv = []string{t.host.Shell(), "-c", r.Command}
	}
	total := 0
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, nil, fault.InvalidField("argv", "argv holds a NUL byte")
		}
		total += len(a)
	}
	if argv[0] == "" || total > maxCommandBytes {
		return nil, nil, fault.InvalidField("argv", "argv is empty or too long")
	}
	if r.Cwd == "" {
		r.Cwd = t.host.DefaultCwd()
	}
	if err := agent.CheckPath(r.Cwd); err != nil {
		return nil, nil, fault.InvalidField("cwd", "cwd must be an absolute, clean path")
	}
	switch {
	case r.Timeout != 0:
		if err := CheckTimeout(r.Timeout); err != nil {
			return nil, nil, err
		}
	case r.Background && t.host.Limits().TTL > 0:
		// A detached command asked for no timeout in a sandbox whose TTL
		// deletes it: the TTL bounds it (a dev server, a long build), and
		// its CPU time limit still applies. Timeout 0: no wall timer.
	default:
		r.Timeout = DefaultTimeout
	}
	switch {
	case r.OutputLimit < 0 || r.OutputLimit > MaxOutputLimit:
		return nil, nil, fault.InvalidField("output_limit", fmt.Sprintf("output_limit must be between 0 and %d", MaxOutputLimit))
	case r.OutputLimit == 0:
		r.OutputLimit = DefaultOutputLimit
	}
	if len(r.Stdin) > MaxStdin {
		return nil, nil, fault.InvalidField("stdin", fmt.Sprintf("stdin larger than %d bytes", MaxStdin))
	}
	if r.Sudo && !t.cfg.AllowSudo {
		return nil, nil, errSudo
	}
	env, err := execenv.Build(t.host.BaseEnv(), t.host.NetEnv(r.Env), r.PrivilegedEnv, execenv.MaxVars)
	if err != nil {
		return nil, nil, err
	}
	return argv, env, nil
}

// errSudo refuses sudo on a server that does not allow it.
var errSudo = fault.New(fault.Forbidden, "sudo is not enabled on this server (SANDBOX_ENABLE_SUDO)")

// Exec starts a command. Unless r.Background, it waits for the end and the
// caller's ctx bounds it: a cancelled ctx (a client that went away) kills
// the execution's tree. A background execution outlives ctx and is found
// again with Execution(id).
func (t *Table) Exec(ctx context.Context, r ExecRequest) (*Execution, error) {
	argv, env, err := t.Check(&r)
	if err != nil {
		return nil, err
	}
	inst, err := t.host.Ensure(ctx)
	if err != nil {
		return nil, err
	}
	if r.Keep {
		if err := t.checkKeep(); err != nil {
			return nil, err
		}
	}
	slot, home, err := t.Acquire()
	if err != nil {
		return nil, err
	}
	slot.MarkCPUStart()
	lim := t.host.Limits()
	req := agent.SpawnReq{
		Argv:  argv,
		Env:   env,
		Cwd:   r.Cwd,
		Root:  r.Sudo,
		Stdin: len(r.Stdin) > 0,
		Limits: agent.Limits{
			CPUSeconds:    uint64(math.Ceil(lim.CPUTime.Seconds())),
			FileSizeBytes: uint64(max(lim.DiskBytes, 0)),
			OpenFiles:     defaultOpenFiles,
		},
	}
	p, err := spawnIn(ctx, inst, req, slot, home)
	if err == nil && r.Keep {
		if err = outcopy.KeepStreams(p); err != nil {
			p.Close()
		}
	}
	if err != nil {
		t.Kill(slot)
		slot.Dirty = true
		t.Release(slot)
		return nil, spawnfault.Of(err, lim.Pids)
	}

	e := &Execution{
		Sandbox: t.cfg.ID, Argv: argv, Started: time.Now(),
		Stdout: t.host.NewOutput(r.OutputLimit), Stderr: t.host.NewOutput(r.OutputLimit),
		done: make(chan struct{}), status: StatusRunning, actor: r.Actor,
	}
	kill := make(chan string, 1)
	e.cancel = func(reason string) {
		select {
		case kill <- reason:
		default:
		}
	}
	t.register(e)

	copies := outcopy.NewCopies(2)
	copyFn := outcopy.Copy
	if r.Keep {
		copyFn = outcopy.CopyKept
	}
	go copyFn(copies, e.Stdout, p.Stdout)
	go copyFn(copies, e.Stderr, p.Stderr)
	if p.Stdin != nil {
		go func() {
			_, _ = p.Stdin.Write(r.Stdin)
			_ = p.Stdin.Close()
		}()
	}
	if r.Background {
		go t.supervise(context.WithoutCancel(ctx), e, p, slot, kill, copies, r, lim.CPUTime)
		return e, nil
	}
	// A foreground execution is supervised on the caller's goroutine: a
	// cancelled ctx kills it there (StatusKilled, ReasonClient), as a
	// kill does, and the exit reaches the caller without a hand-off.
	t.supervise(ctx, e, p, slot, kill, copies, r, lim.CPUTime)
	return e, nil
}

// spawnIn starts one command in slot's execution group; home are the
// sandbox's home files for it (Acquire). In the run of a call whose record
// goes first (dispatch.HeldRecord), the init holds the command before its
// fork until the record is durable (agent.Hold): once the request is
// sent, this goroutine commits the record (Wait) while the init prepares
// the command, then releases it, or refuses it if the record could not be
// stored. A spawn that fails or is given up ends the hold unreleased
// first, so the command cannot start after the caller has cleaned its
// group up.
func spawnIn(ctx context.Context, inst *agent.Instance, req agent.SpawnReq, sl *execgroup.Group, home []*os.File) (*agent.Process, error) {
	rec := dispatch.HeldRecord(ctx)
	if rec == nil {
		return inst.Spawn(ctx, req, sl.Attach, home)
	}
	h, err := agent.NewHold()
	if err != nil {
		return nil, err
	}
	p, err := inst.SpawnHeld(ctx, req, sl.Attach, home, h, func() error {
		_, err := rec.Wait()
		return err
	})
	h.CloseReader()
	if err != nil {
		h.End(errSpawnAbandoned)
	}
	return p, err
}

// errSpawnAbandoned ends a hold whose spawn failed or was given up.
var errSpawnAbandoned = errors.New("spawn abandoned")

// supervise waits for the end, enforces the wall and CPU limits (cpuLimit:
// the tree's CPU time), kills the tree and records the result.
func (t *Table) supervise(ctx context.Context, e *Execution, p *agent.Process, slot *execgroup.Group, kill chan string,
	copies *outcopy.Copies, r ExecRequest, cpuLimit time.Duration) {
	var wall <-chan time.Time // nil: no wall limit (Check)
	if r.Timeout > 0 {
		timer := time.NewTimer(r.Timeout)
		defer timer.Stop()
		wall = timer.C
	}
	poll := time.NewTicker(cpuPoll)
	defer poll.Stop()
	// cpuStart is the group's CPU time at the start (the group is
	// reused, its counter cumulative); unread, the first poll's, within
	// cpuPoll of the start.
	cpuStart := slot.CPUStart()

	var ex agent.Exit
	var status, reason string
	exited := false
	for !exited {
		select {
		case ex = <-p.Exited():
			exited = true
		case <-wall:
			status, reason = StatusTimedOut, ReasonTimeout
			t.Kill(slot)
		case rsn := <-kill:
			status, reason = StatusKilled, rsn
			t.Kill(slot)
		case <-ctx.Done():
			status, reason = StatusKilled, ReasonClient
			t.Kill(slot)
		case <-poll.C:
			// RLIMIT_CPU is per process; the tree's total is the
			// execution group's CPU time (polled only for executions
			// that run this long).
			if cpuStart < 0 {
				if st, err := slot.Cgroup.Stats(); err == nil {
					cpuStart = st.CPUUsage
				}
			} else if st, err := slot.Cgroup.Stats(); err == nil && cpuLimit > 0 && st.CPUUsage-cpuStart > cpuLimit-cpuPoll {
				status, reason = StatusKilled, ReasonCPU
				t.Kill(slot)
			}
		}
		if status != "" && !exited {
			// Killed: wait for the exit that follows.
			select {
			case ex = <-p.Exited():
			case <-time.After(exitAfterKill):
				ex = agent.Exit{Code: -1, Signal: int(syscall.SIGKILL)}
			}
			exited = true
		}
	}
	kept := false
	// empty: the group was seen to hold no task once the main process
	// ended (or what it left was killed and is gone).
	empty := false
	if r.Keep && status == "" {
		// The main process ended on its own: what it left running stays
		// (keep.go), and the call's output is what the pipes hold now.
		outcopy.EndCall(p.Stdout, p.Stderr)
		copies.Wait(drainGrace, func() { outcopy.EndCall(p.Stdout, p.Stderr) })
		populated, err := slot.Populated()
		kept = err == nil && populated
		empty = err == nil && !populated
	} else {
		// The main process is gone; whatever it left running in its group
		// goes too, which also closes the output pipes.
		t.killLeftovers(slot)
		empty = !slot.Dirty
		copies.Wait(drainGrace, p.Close)
	}
	if status == "" {
		status = StatusCompleted
		switch {
		case ex.Signal == int(syscall.SIGKILL) && t.oomSince(slot):
			status, reason = StatusKilled, ReasonMemory
		case ex.Signal == int(syscall.SIGXCPU) || (ex.Signal == int(syscall.SIGKILL) && cpuLimit > 0 && time.Duration(ex.CPUms)*time.Millisecond >= cpuLimit):
			status, reason = StatusKilled, ReasonCPU
		}
	}
	// Before the group serves another; a kept execution's group goes on
	// counting what it left running, which this figure leaves out.
	// A slot going back to the pool clean (nothing was left in its group,
	// which nothing can join from inside) keeps this reading as its next
	// execution's start.
	cpu := slot.CPUSinceStart(time.Duration(ex.CPUms)*time.Millisecond, empty)
	if kept {
		t.keepSlot(slot)
	} else {
		t.Release(slot)
	}
	e.Stdout.Close()
	e.Stderr.Close()
	e.mu.Lock()
	e.status, e.reason, e.kept = status, reason, kept
	e.exitCode, e.signal = ex.Code, ex.Signal
	e.duration = time.Since(e.Started)
	e.cpu = cpu
	res := Result{Status: status, Reason: reason, DurationMS: e.duration.Milliseconds()}
	e.mu.Unlock()
	t.finish(e)
	t.host.Observe(status)
	close(e.done)
	if r.Background {
		// The call was audited when it started; its end is recorded here.
		t.host.Audit(context.WithoutCancel(ctx), r.Actor, "exec.finish", status, map[string]any{
			"command": auditCommand(e.Argv), "command_id": e.ID, "exit_code": ex.Code, "signal": ex.Signal, "reason": res.Reason,
			"duration_ms": res.DurationMS,
		})
	}
}

// auditCommand is the command line as audited (the audit log redacts
// secrets in it); output is never stored.
func auditCommand(argv []string) string {
	if len(argv) == 3 && argv[0] == "/bin/bash" && argv[1] == "-c" {
		return argv[2]
	}
	return strings.Join(argv, " ")
}

// register gives e its id and lists it as running.
func (t *Table) register(e *Execution) {
	t.mu.Lock()
	t.seq++
	e.ID = t.cfg.ID[2:10] + "-" + strconv.Itoa(t.seq)
	t.running[e.ID] = e
	t.byID[e.ID] = e
	t.mu.Unlock()
	t.host.Touch()
}

func (t *Table) finish(e *Execution) {
	t.mu.Lock()
	delete(t.running, e.ID)
	t.finished = append(t.finished, e)
	if len(t.finished) > maxFinishedExecs {
		old := t.finished[0]
		t.finished = t.finished[1:]
		delete(t.byID, old.ID)
		// Forgotten: its bytes leave the output budget now (a reader
		// that still holds it reads them on).
		old.Stdout.Release()
		old.Stderr.Release()
	}
	t.mu.Unlock()
	t.host.Touch()
}
