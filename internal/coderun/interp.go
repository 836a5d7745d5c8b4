package coderun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Interpreter settings, with their reasons.
const (
	// startTimeout bounds an interpreter's start-up (python with a cold
	// page cache takes ~100 ms; node ~50 ms).
	startTimeout = 20 * time.Second
	// sessionCPUBudget is RLIMIT_CPU of a session's interpreter: the CPU
	// time of ONE execution is capped on the execution cgroup (see run);
	// this only ends a session that has used an hour of CPU in all.
	sessionCPUBudget = time.Hour
	// cpuPoll is how often a running cell's CPU time is checked.
	cpuPoll = 200 * time.Millisecond
	// drainGrace bounds waiting for the last output after a kill.
	drainGrace = 2 * time.Second
	// eventBuffer is how many pipe events wait for a reader; a cell that
	// floods output is paced by the pipe, not by server memory.
	eventBuffer = 64
)

// Output is one Jupyter-style output of a cell.
type Output struct {
	OutputType     string         `json:"output_type"`
	Name           string         `json:"name,omitempty"`
	Text           *string        `json:"text,omitempty"`
	Data           map[string]any `json:"data,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	ExecutionCount *int           `json:"execution_count,omitempty"`
	EName          string         `json:"ename,omitempty"`
	EValue         *string        `json:"evalue,omitempty"`
	Traceback      []string       `json:"traceback,omitempty"`
}

// Statuses of an execution (AIO's: ok, error, timeout).
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusTimeout = "timeout"
)

// Reasons an interpreter was killed.
const (
	ReasonTimeout = "timeout"
	ReasonCPU     = "cpu_time"
	ReasonMemory  = "memory"
	ReasonExited  = "exited"
	ReasonClient  = "client"
)

// cell is one execution's outcome inside an interpreter.
type cell struct {
	status   string
	outputs  []Output
	stdout   string
	stderr   string
	exitCode *int
	// truncated: output beyond the cap was dropped.
	truncated bool
	// lost: the interpreter died or was killed; its state is gone.
	lost   bool
	reason string
	cpu    time.Duration
	// exit is the interpreter's exit when it ended during the cell.
	exit *agent.Exit
}

// driverMsg is a message from a driver.
type driverMsg struct {
	T          string   `json:"t"`
	ID         int      `json:"id"`
	Status     string   `json:"status"`
	Outputs    []Output `json:"outputs"`
	ExitCode   *int     `json:"exit_code"`
	Version    string   `json:"version"`
	Matplotlib bool     `json:"matplotlib"`
}

// interp is one running interpreter with its driver.
type interp struct {
	lang    string
	proc    *sandbox.Proc
	out     chan event // stdout: raw output and result messages
	errc    chan event // stderr: raw output and end markers
	done    chan struct{}
	gone    chan struct{} // closed when the interpreter exited
	exit    agent.Exit
	nextID  int
	version string
	mpl     bool
	once    sync.Once
}

func newNonce() string {
	b := make([]byte, nonceLen/2)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// startInterp starts lang's interpreter in sb and waits for its driver.
func startInterp(ctx context.Context, sb *sandbox.Sandbox, lang, cwd string, admin bool) (*interp, error) {
	rt, ok := runtimes[lang]
	if !ok {
		return nil, fault.InvalidField("language", "unsupported language "+strconv.Quote(lang))
	}
	nonce := newNonce()
	p, err := sb.Spawn(ctx, sandbox.SpawnSpec{
		Argv:          rt.argv(nonce),
		Cwd:           cwd,
		Stdin:         true,
		Env:           rt.env,
		PrivilegedEnv: admin,
		CPUTime:       sessionCPUBudget,
	})
	if err != nil {
		var fe *fault.Error
		if errors.As(err, &fe) && fe.Kind == fault.Invalid && fe.Field == "" {
			return nil, fault.Wrap(fault.Unavailable, err, "the "+lang+" interpreter is not available in this sandbox")
		}
		return nil, err
	}
	in := &interp{lang: lang, proc: p, out: make(chan event, eventBuffer), errc: make(chan event, eventBuffer),
		done: make(chan struct{}), gone: make(chan struct{})}
	go readFrames(p.Stdout, nonce, in.out, in.done)
	go readFrames(p.Stderr, nonce, in.errc, in.done)
	go func() {
		in.exit = <-p.Exited()
		close(in.gone)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	var early strings.Builder
	for {
		select {
		case ev := <-in.out:
			if ev.msg != nil {
				var m driverMsg
				if json.Unmarshal(ev.msg, &m) == nil && m.T == "ready" {
					in.version, in.mpl = m.Version, m.Matplotlib
					return in, nil
				}
			}
		case ev := <-in.errc:
			if early.Len() < 4096 {
				early.Write(ev.raw)
			}
		case <-in.gone:
			in.close()
			return nil, fault.Errorf(fault.Unavailable, "the %s interpreter exited at start (exit code %d): %s", lang, in.exit.Code, firstLine(early.String()))
		case <-timer.C:
			in.close()
			return nil, fault.Errorf(fault.Unavailable, "the %s interpreter did not start within %s", lang, startTimeout)
		case <-ctx.Done():
			in.close()
			return nil, fault.Wrap(fault.Unavailable, ctx.Err(), "the request ended while the interpreter started")
		}
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// close kills the interpreter's tree and frees its execution group.
func (in *interp) close() {
	in.once.Do(func() {
		close(in.done)
		in.proc.Release()
	})
}

// alive reports whether the interpreter still runs.
func (in *interp) alive() bool {
	select {
	case <-in.gone:
		return false
	default:
		return true
	}
}

// limits of one run.
type limits struct {
	timeout     time.Duration
	cpu         time.Duration // 0: none
	outputLimit int
	// output, when set, sees the raw output as it comes (Request.Output).
	output func(stream string, p []byte)
	// env are the cell's own environment variables (Request.Env).
	env map[string]string
}

// request encodes a cell for lang's driver.
func (in *interp) request(id int, code, cwd string, env map[string]string) ([]byte, error) {
	var body []byte
	if in.lang == Bash {
		if strings.IndexByte(code, 0) >= 0 {
			return nil, fault.InvalidField("code", "bash code must not contain NUL bytes")
		}
		if cwd != "" {
			// The cell runs only if the cd worked (cd reports why not);
			// eval of the quoted cell keeps its text exactly.
			code = "cd -- " + shellQuote(cwd) + " && eval " + shellQuote(code)
		}
		body = []byte(code)
	} else {
		var err error
		if body, err = json.Marshal(map[string]any{"id": id, "code": code, "cwd": cwd, "env": env}); err != nil {
			return nil, fmt.Errorf("encode cell: %w", err)
		}
	}
	return append([]byte(strconv.Itoa(len(body))+"\n"), body...), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// run executes one cell. The interpreter is killed (and c.lost set) when a
// limit is exceeded, the client goes away or the driver breaks protocol.
func (in *interp) run(ctx context.Context, code, cwd string, l limits) (cell, error) {
	in.nextID++
	id := in.nextID
	req, err := in.request(id, code, cwd, l.env)
	if err != nil {
		return cell{}, err
	}
	before, _ := in.proc.Stats()
	stdout, stderr := outbuf.NewOutput(l.outputLimit), outbuf.NewOutput(l.outputLimit)
	c := cell{status: StatusOK}

	wrote := make(chan error, 1)
	go func() {
		_, err := in.proc.Stdin.Write(req)
		wrote <- err
	}()

	timer := time.NewTimer(l.timeout)
	defer timer.Stop()
	poll := time.NewTicker(cpuPoll)
	defer poll.Stop()
	var result *driverMsg
	gotEnd := false
	kill := func(status, reason string) {
		c.status, c.reason, c.lost = status, reason, true
		in.proc.Kill()
	}
	for !c.lost && (result == nil || !gotEnd) {
		select {
		case err := <-wrote:
			if err != nil && in.alive() {
				kill(StatusError, ReasonExited)
			}
		case ev := <-in.out:
			switch {
			case ev.raw != nil:
				_, _ = stdout.Write(ev.raw)
				if l.output != nil {
					l.output("stdout", ev.raw)
				}
			case ev.oversize:
				c.truncated = true
				result = &driverMsg{T: "result", ID: id, Status: StatusOK}
				c.outputs = append(c.outputs, errorOutput("OutputTooLarge", fmt.Sprintf("the cell's rich outputs exceeded %d MiB and were dropped", maxMessageBytes>>20)))
			case ev.msg != nil:
				var m driverMsg
				if err := json.Unmarshal(ev.msg, &m); err != nil || m.T != "result" || m.ID != id {
					kill(StatusError, "protocol")
					continue
				}
				result = &m
			case ev.eof:
				// The interpreter closed stdout: it is exiting.
				kill(StatusError, ReasonExited)
			}
		case ev := <-in.errc:
			switch {
			case ev.raw != nil:
				_, _ = stderr.Write(ev.raw)
				if l.output != nil {
					l.output("stderr", ev.raw)
				}
			case ev.msg != nil:
				gotEnd = true
			case ev.eof:
				kill(StatusError, ReasonExited)
			}
		case <-in.gone:
			kill(StatusError, ReasonExited)
		case <-timer.C:
			kill(StatusTimeout, ReasonTimeout)
		case <-poll.C:
			if st, err := in.proc.Stats(); err == nil && l.cpu > 0 && st.CPUUsage-before.CPUUsage > l.cpu {
				kill(StatusError, ReasonCPU)
			}
		case <-ctx.Done():
			kill(StatusError, ReasonClient)
		}
	}
	after, _ := in.proc.Stats()
	c.cpu = after.CPUUsage - before.CPUUsage
	if c.lost {
		// Collect what the tree wrote before it died, then free it.
		in.drain(stdout, stderr)
		in.close()
		if after.OOMKills > before.OOMKills && c.reason == ReasonExited {
			c.reason = ReasonMemory
		}
		var ex agent.Exit
		select {
		case <-in.gone:
			ex = in.exit
		case <-time.After(drainGrace):
		}
		if c.reason == ReasonExited && ex.Signal == int(syscall.SIGXCPU) {
			c.reason = ReasonCPU
		}
		if c.reason == ReasonExited {
			c.exit = &ex
		}
		c.outputs = append(c.outputs, lostOutput(in.lang, c.reason, l, ex))
	}
	if result != nil {
		c.outputs = append(result.Outputs, c.outputs...)
		if result.Status == StatusError && c.status == StatusOK {
			c.status = StatusError
		}
		c.exitCode = result.ExitCode
	}
	stdout.Close()
	stderr.Close()
	var t1, t2 bool
	c.stdout, t1 = stdout.Text()
	c.stderr, t2 = stderr.Text()
	c.truncated = c.truncated || t1 || t2
	return c, nil
}

// drain reads the pipes until both ended or drainGrace passed.
func (in *interp) drain(stdout, stderr *outbuf.Output) {
	deadline := time.NewTimer(drainGrace)
	defer deadline.Stop()
	outDone, errDone := false, false
	for !outDone || !errDone {
		select {
		case ev := <-in.out:
			if ev.raw != nil {
				_, _ = stdout.Write(ev.raw)
			}
			outDone = outDone || ev.eof
		case ev := <-in.errc:
			if ev.raw != nil {
				_, _ = stderr.Write(ev.raw)
			}
			errDone = errDone || ev.eof
		case <-deadline.C:
			return
		}
	}
}

func errorOutput(name, value string) Output {
	return Output{OutputType: "error", EName: name, EValue: &value, Traceback: []string{name + ": " + value}}
}

// lostOutput is the error output that tells the client its session state
// is gone, and why.
func lostOutput(lang, reason string, l limits, ex agent.Exit) Output {
	const lost = "; the interpreter was stopped and the session's state is lost (the next call starts a new one)"
	switch reason {
	case ReasonTimeout:
		return errorOutput("TimeoutError", fmt.Sprintf("execution exceeded the timeout of %s%s", l.timeout, lost))
	case ReasonCPU:
		return errorOutput("CPUTimeExceeded", fmt.Sprintf("execution exceeded the CPU time limit of %s%s", l.cpu, lost))
	case ReasonMemory:
		return errorOutput("MemoryError", "the interpreter was killed for exceeding the sandbox's memory limit"+lost)
	case ReasonClient:
		return errorOutput("Interrupted", "the request ended before the execution finished"+lost)
	case "protocol":
		return errorOutput("DriverError", "the "+lang+" driver sent an unexpected reply"+lost)
	}
	msg := fmt.Sprintf("the %s interpreter exited (exit code %d", lang, ex.Code)
	if ex.Signal != 0 {
		msg += fmt.Sprintf(", signal %d", ex.Signal)
	}
	return errorOutput("InterpreterExited", msg+")"+lost)
}
