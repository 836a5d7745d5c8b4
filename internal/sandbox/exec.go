package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/isolate/cgroup"
	"github.com/sandhold/sandhold/internal/outbuf"
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
	// maxEnvVars caps the caller's environment entries.
	maxEnvVars = 256
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
	// Background command in a sandbox with a TTL (checkExec).
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
	for _, st := range []struct {
		name string
		out  *outbuf.Output
		off  int64
	}{{"stdout", e.Stdout, stdoutOffset}, {"stderr", e.Stderr, stderrOffset}} {
		if st.out.Evicted() && st.off < st.out.Total() {
			return fault.Errorf(fault.Gone, "the %s of command %s is no longer kept: the server's output budget evicted it (%d bytes) to make room for newer output; "+
				"read output while the command runs or soon after it ends", st.name, e.ID, st.out.Total())
		}
	}
	return nil
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

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// privilegedEnv are variables that change how every program loads or
// runs; only admin keys may set them (SECURITY-RULES.md → Exec).
var privilegedEnv = map[string]bool{
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "LD_DEBUG_OUTPUT": true,
	"LD_PROFILE": true, "LD_ORIGIN_PATH": true, "GCONV_PATH": true, "HOSTALIASES": true,
	"LOCALDOMAIN": true, "RES_OPTIONS": true, "NLSPATH": true, "MALLOC_CHECK_": true,
	"BASH_ENV": true, "ENV": true, "PYTHONSTARTUP": true, "NODE_OPTIONS": true, "PERL5OPT": true,
}

// BaseEnv is the environment every execution starts from; nothing of the
// server's own environment is in it.
func BaseEnv() map[string]string {
	return map[string]string{
		"PATH":    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":    "/workspace",
		"USER":    "sandbox",
		"LOGNAME": "sandbox",
		"SHELL":   "/bin/bash",
		"LANG":    "C.UTF-8",
		"LC_ALL":  "C.UTF-8",
		"TERM":    "xterm-256color",
	}
}

// BuildEnv merges the caller's variables over BaseEnv after checking them.
func BuildEnv(user map[string]string, privileged bool) ([]string, error) {
	return buildEnv(BaseEnv(), user, privileged)
}

// buildEnv merges the caller's variables over env (which it changes)
// after checking them.
func buildEnv(env, user map[string]string, privileged bool) ([]string, error) {
	if len(user) > maxEnvVars {
		return nil, fault.InvalidField("env", fmt.Sprintf("at most %d environment variables", maxEnvVars))
	}
	for k, v := range user {
		if !envName.MatchString(k) {
			return nil, fault.InvalidField("env", fmt.Sprintf("environment variable name %q is not valid", k))
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, fault.InvalidField("env", fmt.Sprintf("environment variable %s holds a NUL byte", k))
		}
		if privilegedEnv[strings.ToUpper(k)] && !privileged {
			return nil, fault.InvalidField("env", fmt.Sprintf("environment variable %s may only be set by admin keys", k))
		}
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// checkExec validates a request and fills defaults.
func (s *Sandbox) checkExec(r *ExecRequest) ([]string, []string, error) {
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
		argv = []string{s.shell(), "-c", r.Command}
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
		r.Cwd = s.defaultCwd()
	}
	if err := agent.CheckPath(r.Cwd); err != nil {
		return nil, nil, fault.InvalidField("cwd", "cwd must be an absolute, clean path")
	}
	switch {
	case r.Timeout != 0:
		if err := CheckTimeout(r.Timeout); err != nil {
			return nil, nil, err
		}
	case r.Background && s.rec.Spec.TTL > 0:
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
	if r.Sudo && !s.m.cfg.AllowSudo {
		return nil, nil, fault.New(fault.Forbidden, "sudo is not enabled on this server (SANDBOX_ENABLE_SUDO)")
	}
	env, err := buildEnv(s.baseEnv(), s.netEnv(r.Env), r.PrivilegedEnv)
	if err != nil {
		return nil, nil, err
	}
	return argv, env, nil
}

// Exec starts a command. Unless r.Background, it waits for the end and the
// caller's ctx bounds it: a cancelled ctx (a client that went away) kills
// the execution's tree. A background execution outlives ctx and is found
// again with Execution(id).
func (s *Sandbox) Exec(ctx context.Context, r ExecRequest) (*Execution, error) {
	argv, env, err := s.checkExec(&r)
	if err != nil {
		return nil, err
	}
	inst, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	if r.Keep {
		if err := s.checkKeep(); err != nil {
			return nil, err
		}
	}
	slot, err := s.acquireSlot()
	if err != nil {
		return nil, err
	}
	slot.markCPUStart()
	cpuLimit := s.rec.Spec.Limits.CPUTime
	req := agent.SpawnReq{
		Argv:  argv,
		Env:   env,
		Cwd:   r.Cwd,
		Root:  r.Sudo,
		Stdin: len(r.Stdin) > 0,
		Limits: agent.Limits{
			CPUSeconds:    uint64(math.Ceil(cpuLimit.Seconds())),
			FileSizeBytes: uint64(max(s.rec.Spec.Limits.DiskBytes, 0)),
			OpenFiles:     defaultOpenFiles,
		},
	}
	p, err := s.spawnIn(ctx, inst, req, slot)
	if err == nil && r.Keep {
		if err = keepStreams(p); err != nil {
			p.Close()
		}
	}
	if err != nil {
		s.killSlot(slot)
		slot.dirty = true
		s.releaseSlot(slot)
		return nil, s.spawnFault(err)
	}

	s.mu.Lock()
	s.execSeq++
	id := s.rec.ID[2:10] + "-" + strconv.Itoa(s.execSeq)
	s.mu.Unlock()
	e := &Execution{
		ID: id, Sandbox: s.rec.ID, Argv: argv, Started: time.Now(),
		Stdout: s.NewOutput(r.OutputLimit), Stderr: s.NewOutput(r.OutputLimit),
		done: make(chan struct{}), status: StatusRunning, actor: r.Actor,
	}
	kill := make(chan string, 1)
	e.cancel = func(reason string) {
		select {
		case kill <- reason:
		default:
		}
	}
	s.register(e)

	copies := newOutputCopies(2)
	copyFn := copyOut
	if r.Keep {
		copyFn = copyKept
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
		go s.supervise(context.WithoutCancel(ctx), e, p, slot, kill, copies, r)
		return e, nil
	}
	// A foreground execution is supervised on the caller's goroutine: a
	// cancelled ctx kills it there (StatusKilled, ReasonClient), as a
	// kill does, and the exit reaches the caller without a hand-off.
	s.supervise(ctx, e, p, slot, kill, copies, r)
	return e, nil
}

// spawnIn starts one command in slot's execution group. In the run of a
// call whose record goes first (dispatch.HeldRecord), the init holds the
// command before its fork until the record is durable (agent.Hold): once
// the request is sent, this goroutine commits the record (Wait) while the
// init prepares the command, then releases it, or refuses it if the record
// could not be stored. A spawn that fails or is given up ends the hold
// unreleased first, so the command cannot start after the caller has
// cleaned its group up.
func (s *Sandbox) spawnIn(ctx context.Context, inst *agent.Instance, req agent.SpawnReq, sl *slot) (*agent.Process, error) {
	rec := dispatch.HeldRecord(ctx)
	if rec == nil {
		return inst.Spawn(ctx, req, sl.attach, s.homeFor(sl.attach))
	}
	h, err := agent.NewHold()
	if err != nil {
		return nil, err
	}
	p, err := inst.SpawnHeld(ctx, req, sl.attach, s.homeFor(sl.attach), h, func() error {
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

// pidsRetry is the Retry-After of a sandbox at its process limit: a
// polling interval, as nobody knows when the sandbox's processes end.
const pidsRetry = 2 * time.Second

// spawnFault maps what the init answered to a failed spawn onto the error
// kinds clients see. Every errno a caller's input or the sandbox's state
// can cause is a 4xx naming the cause; only what is left is internal.
func (s *Sandbox) spawnFault(err error) error {
	var pe *agent.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case "ENOENT":
			return fault.Wrap(fault.Invalid, err, "command not found or cwd does not exist")
		case "ENOTDIR", "ELOOP", "ENAMETOOLONG":
			// chdir to the cwd (or the command's path) failed: the
			// caller named something that is not a usable directory.
			return &fault.Error{Kind: fault.Invalid, Field: "cwd", Msg: "cwd is not a directory, or the command path is not valid", Err: err}
		case "EACCES", "EPERM":
			return fault.Wrap(fault.Forbidden, err, "permission denied")
		case "EAGAIN":
			// fork failed: the user group is at its pids limit (the
			// only limit that makes fork answer EAGAIN here).
			return &fault.Error{Kind: fault.RateLimited, RetryAfter: int(pidsRetry / time.Second), Err: err,
				Msg: fmt.Sprintf("the sandbox is at its process limit (pids %d): retry when its commands end, or close sessions", s.rec.Spec.Limits.Pids)}
		case "ENOMEM":
			return fault.Wrap(fault.Unavailable, err, "the sandbox is out of memory (its memory limit)")
		case agent.CodePTYLimit:
			// The sandbox's own devpts is full: its sessions and
			// programs hold every terminal it may have.
			return &fault.Error{Kind: fault.RateLimited, RetryAfter: int(pidsRetry / time.Second), Err: err,
				Msg: "the sandbox has all its terminals open (SANDBOX_MAX_PTYS): close a shell session or a terminal in it"}
		case agent.CodePTYHost:
			return &fault.Error{Kind: fault.Unavailable, RetryAfter: int(pidsRetry / time.Second), Err: err,
				Msg: "no terminal is free on this host: retry later"}
		case agent.CodeInvalid:
			return fault.Wrap(fault.Invalid, err, pe.Msg)
		}
	}
	if errors.Is(err, agent.ErrGone) {
		return fault.Wrap(fault.Unavailable, err, "the sandbox stopped")
	}
	return err
}

// copyBufSize is the read size of an execution's output pipes: a pipe's
// default capacity is 64 KiB, and 32 KiB reads keep the copies few.
const copyBufSize = 32 << 10

// copyBufs recycles copyOut's buffers: two per execution would otherwise be
// 64 KiB allocated and zeroed per command, the largest allocation of the
// exec path.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// outputCopies counts an execution's output copies down. Unlike a
// WaitGroup it can be asked without blocking: when the copies are done,
// as they are by the time a short command's exit is handled, supervise
// waits for them without a goroutine of its own or a timer.
type outputCopies struct {
	done chan struct{}
	n    int
}

func newOutputCopies(n int) *outputCopies {
	return &outputCopies{done: make(chan struct{}, n), n: n}
}

// Done reports one copy finished.
func (c *outputCopies) Done() { c.done <- struct{}{} }

// wait waits for every copy. If they are not all done within grace, it
// calls expire (which must make the copies end) and waits on.
func (c *outputCopies) wait(grace time.Duration, expire func()) {
	var timer *time.Timer
	for range c.n {
		select {
		case <-c.done:
			continue
		default:
		}
		if timer == nil {
			timer = time.NewTimer(grace)
			defer timer.Stop()
		}
		select {
		case <-c.done:
		case <-timer.C:
			expire()
			<-c.done
		}
	}
}

func copyOut(wg interface{ Done() }, dst *outbuf.Output, src *os.File) {
	defer wg.Done()
	defer func() { _ = src.Close() }()
	buf := copyBufs.Get().(*[]byte) //nolint:forcetypeassert // the pool holds only *[]byte
	defer copyBufs.Put(buf)
	// A plain read loop: io.CopyBuffer would hand the copy to
	// (*os.File).WriteTo, which ignores the buffer and allocates its own.
	// Output.Write copies what it keeps, so the buffer is free again
	// once the loop ends.
	for {
		n, err := src.Read(*buf)
		if n > 0 {
			_, _ = dst.Write((*buf)[:n])
		}
		if err != nil {
			return
		}
	}
}

// supervise waits for the end, enforces the wall and CPU limits, kills
// the tree and records the result.
func (s *Sandbox) supervise(ctx context.Context, e *Execution, p *agent.Process, slot *slot, kill chan string,
	copies *outputCopies, r ExecRequest) {
	var wall <-chan time.Time // nil: no wall limit (checkExec)
	if r.Timeout > 0 {
		timer := time.NewTimer(r.Timeout)
		defer timer.Stop()
		wall = timer.C
	}
	poll := time.NewTicker(cpuPoll)
	defer poll.Stop()
	cpuLimit := s.rec.Spec.Limits.CPUTime
	// cpuStart is the group's CPU time at the start (the group is
	// reused, its counter cumulative); unread, the first poll's, within
	// cpuPoll of the start.
	cpuStart := slot.cpuStart

	var ex agent.Exit
	var status, reason string
	exited := false
	for !exited {
		select {
		case ex = <-p.Exited():
			exited = true
		case <-wall:
			status, reason = StatusTimedOut, ReasonTimeout
			s.killSlot(slot)
		case rsn := <-kill:
			status, reason = StatusKilled, rsn
			s.killSlot(slot)
		case <-ctx.Done():
			status, reason = StatusKilled, ReasonClient
			s.killSlot(slot)
		case <-poll.C:
			// RLIMIT_CPU is per process; the tree's total is the
			// execution group's CPU time (polled only for executions
			// that run this long).
			if cpuStart < 0 {
				if st, err := slot.g.Stats(); err == nil {
					cpuStart = st.CPUUsage
				}
			} else if st, err := slot.g.Stats(); err == nil && cpuLimit > 0 && st.CPUUsage-cpuStart > cpuLimit-cpuPoll {
				status, reason = StatusKilled, ReasonCPU
				s.killSlot(slot)
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
	if r.Keep && status == "" {
		// The main process ended on its own: what it left running stays
		// (keep.go), and the call's output is what the pipes hold now.
		endCall(p.Stdout, p.Stderr)
		copies.wait(drainGrace, func() { endCall(p.Stdout, p.Stderr) })
		populated, err := slot.populated()
		kept = err == nil && populated
	} else {
		// The main process is gone; whatever it left running in its group
		// goes too, which also closes the output pipes.
		s.killLeftovers(slot)
		copies.wait(drainGrace, p.Close)
	}
	if status == "" {
		status = StatusCompleted
		switch {
		case ex.Signal == int(syscall.SIGKILL) && s.oomSince(slot):
			status, reason = StatusKilled, ReasonMemory
		case ex.Signal == int(syscall.SIGXCPU) || (ex.Signal == int(syscall.SIGKILL) && cpuLimit > 0 && time.Duration(ex.CPUms)*time.Millisecond >= cpuLimit):
			status, reason = StatusKilled, ReasonCPU
		}
	}
	// Before the group serves another; a kept execution's group goes on
	// counting what it left running, which this figure leaves out.
	cpu := slot.cpuSinceStart(time.Duration(ex.CPUms) * time.Millisecond)
	if kept {
		s.keepSlot(slot)
	} else {
		s.releaseSlot(slot)
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
	s.finish(e)
	s.m.observeExec(status)
	close(e.done)
	if r.Background {
		// The call was audited when it started; its end is recorded here.
		s.m.audit(context.WithoutCancel(ctx), Event{Actor: r.Actor, Action: "exec.finish", Sandbox: s.rec.ID, Verdict: status, Detail: map[string]any{
			"command": auditCommand(e.Argv), "command_id": e.ID, "exit_code": ex.Code, "signal": ex.Signal, "reason": res.Reason,
			"duration_ms": res.DurationMS,
		}})
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

// NewOutput makes a stream of at most limit kept bytes charged to the
// sandbox owner's share of the server's output budget (Config.OutputBudget).
func (s *Sandbox) NewOutput(limit int) *outbuf.Output {
	return s.m.cfg.OutputBudget.NewOutput(s.rec.Owner, limit)
}

// NewOutput is the sandbox's NewOutput, for a capability that keeps the
// process's output itself (shell sessions).
func (p *Proc) NewOutput(limit int) *outbuf.Output { return p.s.NewOutput(limit) }

// markCPUStart notes the group's CPU time before an execution starts in it.
func (sl *slot) markCPUStart() {
	sl.cpuStart = -1
	if d, err := sl.g.CPUUsage(); err == nil {
		sl.cpuStart = d
	}
}

// cpuSinceStart is the CPU time of the whole execution: every process
// that ran in its group (children that forked away or were left running
// and killed included), read once its tree is gone. mainOnly, the main
// process's own CPU time (with its waited-for children), stands in where
// the group's counter cannot be read.
func (sl *slot) cpuSinceStart(mainOnly time.Duration) time.Duration {
	if sl.cpuStart < 0 {
		return mainOnly
	}
	end, err := sl.g.CPUUsage()
	if err != nil || end < sl.cpuStart {
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

func (s *Sandbox) register(e *Execution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[e.ID] = e
	s.byID[e.ID] = e
	s.lastUsed = time.Now()
}

func (s *Sandbox) finish(e *Execution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, e.ID)
	s.finished = append(s.finished, e)
	if len(s.finished) > maxFinishedExecs {
		old := s.finished[0]
		s.finished = s.finished[1:]
		delete(s.byID, old.ID)
		// Forgotten: its bytes leave the output budget now (a reader
		// that still holds it reads them on).
		old.Stdout.Release()
		old.Stderr.Release()
	}
	s.lastUsed = time.Now()
}

// Execution returns a running or recently finished execution.
func (s *Sandbox) Execution(id string) (*Execution, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[id]
	if e == nil {
		return nil, fault.New(fault.NotFound, "execution not found")
	}
	return e, nil
}

// killExecs kills every running execution (delete, HALT).
// Long-lived processes (shell sessions, interpreters) die too: their
// owners see the exit and report the lost state.
func (s *Sandbox) killExecs(reason string) {
	s.mu.Lock()
	running := make([]*Execution, 0, len(s.running))
	for _, e := range s.running {
		running = append(running, e)
	}
	procs := make([]*Proc, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
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

// killExecsOf kills the running executions actor started and waits
// (bounded) for them to end; it returns how many it killed.
func (s *Sandbox) killExecsOf(actor, reason string) int {
	s.mu.Lock()
	var running []*Execution
	for _, e := range s.running {
		if e.actor == actor {
			running = append(running, e)
		}
	}
	s.mu.Unlock()
	for _, e := range running {
		e.cancel(reason)
	}
	for _, e := range running {
		select {
		case <-e.done:
		case <-time.After(killWait):
		}
	}
	return len(running)
}

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
	slot *slot
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
	env, err := buildEnv(s.baseEnv(), s.netEnv(sp.Env), sp.PrivilegedEnv)
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
		slot.dirty = true
		s.releaseSlot(slot)
		return nil, s.spawnFault(err)
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
		p.slot.dirty = true
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
	st, err := p.slot.g.Stats()
	if err != nil || !st.MemoryShared || p.oom0 < 0 {
		return st, err
	}
	if now := p.s.sandboxOOMKills(); now > p.oom0 {
		st.OOMKills = now - p.oom0
	}
	return st, nil
}

// File runs one file primitive inside the sandbox (see agent.Client.File);
// a stopped sandbox is started first.
func (s *Sandbox) File(ctx context.Context, op agent.Op, r agent.FileReq) (*agent.FileResp, *os.File, error) {
	inst, err := s.ensure(ctx)
	if err != nil {
		return nil, nil, err
	}
	s.touch()
	return inst.File(ctx, op, r)
}

// Touch marks the sandbox used now, for callers that keep it busy without
// a new execution (a stateful interpreter answering a cell).
func (s *Sandbox) Touch() { s.touch() }

func (s *Sandbox) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}
