package shell

import (
	"context"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Statuses of a bash pipe command (AIO's CommandStatus).
const (
	BashPending   = "pending"
	BashRunning   = "running"
	BashCompleted = "completed"
	BashTimedOut  = "timed_out"
	BashKilled    = "killed"
)

// Bash pipe limits, with their reasons.
const (
	// DefaultMaxOutput is AIO's default max_output_length.
	DefaultMaxOutput = 50_000
	// BashKeep is what the server keeps per stream of one command (head
	// and tail); it is also the largest max_output_length.
	BashKeep = 1 << 20
	// MaxStdinWrite caps one stdin write.
	MaxStdinWrite = 1 << 20
	// maxBashRunning caps concurrent commands per bash session.
	maxBashRunning = 8
	// maxBashKept is how many finished commands a session remembers.
	maxBashKept = 32
	// drainGrace bounds waiting for output after the tree is dead.
	drainGrace = 2 * time.Second
	// stdinTimeout bounds a stdin write to a process that does not read.
	stdinTimeout = 10 * time.Second
)

// BashSession is an API-level session of the bash pipe: a default working
// directory and the commands run in it. Each command is its own process;
// cd and export inside one do not reach the next.
type BashSession struct {
	ID      string
	Sandbox string
	Owner   string
	Created time.Time
	// onFinish is told about every command that ends.
	onFinish func(c *BashCommand)

	// mu guards the fields below.
	mu       sync.Mutex
	workDir  string
	lastUsed time.Time
	closed   bool
	current  *BashCommand
	byID     map[string]*BashCommand
	order    []string // finished commands, oldest first
	count    int
}

// BashCommand is one process of the bash pipe.
type BashCommand struct {
	ID      string
	Command string
	Started time.Time
	Stdout  *outbuf.Output
	Stderr  *outbuf.Output

	proc  *sandbox.Proc
	done  chan struct{}
	kill  chan syscall.Signal
	stdin chan struct{} // a one-slot semaphore for stdin writes
	// in is what clients write to stdin (bash.write): what they submit
	// is admitted line by line (inputgate.go).
	in inputGate

	// mu guards the outcome.
	mu     sync.Mutex
	status string
	exit   *int
}

func newBashSession(id, sb, owner, dir string) *BashSession {
	now := time.Now()
	return &BashSession{ID: id, Sandbox: sb, Owner: owner, Created: now, workDir: dir, lastUsed: now, byID: map[string]*BashCommand{}}
}

// BashRun is one command for the pipe.
type BashRun struct {
	Command    string
	Dir        string
	Env        map[string]string
	Hard       time.Duration
	Privileged bool
}

// run starts a command in sb.
func (b *BashSession) run(ctx context.Context, sb *sandbox.Sandbox, r BashRun) (*BashCommand, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fault.New(fault.Conflict, "the bash session is closed")
	}
	running := 0
	for _, c := range b.byID {
		if c.Status() == BashRunning {
			running++
		}
	}
	if running >= maxBashRunning {
		b.mu.Unlock()
		return nil, fault.Errorf(fault.Conflict, "at most %d commands run at once in one bash session", maxBashRunning)
	}
	if r.Dir != "" {
		b.workDir = r.Dir
	}
	dir := b.workDir
	b.count++
	id := b.ID[:min(8, len(b.ID))] + "-" + strconv.Itoa(b.count)
	b.lastUsed = time.Now()
	b.mu.Unlock()

	p, err := sb.Spawn(context.WithoutCancel(ctx), sandbox.SpawnSpec{Argv: append(defaultSignals(), "/bin/bash", "-c", r.Command), Cwd: dir, Env: r.Env,
		Stdin: true, PrivilegedEnv: r.Privileged})
	if err != nil {
		return nil, err
	}
	c := &BashCommand{ID: id, Command: r.Command, Started: time.Now(), Stdout: sb.NewOutput(BashKeep), Stderr: sb.NewOutput(BashKeep),
		proc: p, done: make(chan struct{}), kill: make(chan syscall.Signal, 1), stdin: make(chan struct{}, 1), status: BashRunning}
	c.in.d.mode = pipeInput
	b.mu.Lock()
	b.byID[id] = c
	b.current = c
	b.mu.Unlock()
	var copies sync.WaitGroup
	copies.Add(2)
	go drain(&copies, c.Stdout, p.Stdout)
	go drain(&copies, c.Stderr, p.Stderr)
	go b.supervise(c, r.Hard, &copies)
	return c, nil
}

func drain(wg *sync.WaitGroup, dst *outbuf.Output, src *os.File) {
	defer wg.Done()
	if src == nil {
		return
	}
	buf := make([]byte, 32<<10)
	_, _ = io.CopyBuffer(dst, src, buf)
}

// supervise waits for the end, applies the hard timeout and kill requests,
// and records the outcome.
func (b *BashSession) supervise(c *BashCommand, hard time.Duration, copies *sync.WaitGroup) {
	var hardC <-chan time.Time
	if hard > 0 {
		t := time.NewTimer(hard)
		defer t.Stop()
		hardC = t.C
	}
	status := ""
	var code, sig int
wait:
	for {
		select {
		case ex := <-c.proc.Exited():
			code, sig = ex.Code, ex.Signal
			break wait
		case <-hardC:
			hardC = nil
			if status == "" {
				status = BashTimedOut
			}
			c.proc.Kill()
		case s := <-c.kill:
			// A signal the process may ignore: it keeps running, and the
			// status says who ended it once it ends.
			if status == "" {
				status = BashKilled
			}
			if s == syscall.SIGKILL {
				c.proc.Kill()
				continue
			}
			_ = c.proc.Signal(s, true)
		}
	}
	if status == "" {
		status = BashCompleted
	}
	// The main process is gone: what it left behind goes too, which
	// closes the pipes.
	c.proc.Kill()
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		c.proc.Close()
		<-drained
	}
	c.proc.Release()
	c.Stdout.Close()
	c.Stderr.Close()
	if sig != 0 {
		code = -sig
	}
	c.mu.Lock()
	c.status = status
	c.exit = &code
	c.mu.Unlock()
	close(c.done)
	if b.onFinish != nil {
		b.onFinish(c)
	}
	b.mu.Lock()
	b.lastUsed = time.Now()
	b.order = append(b.order, c.ID)
	if len(b.order) > maxBashKept {
		old := b.order[0]
		b.order = b.order[1:]
		if b.current == nil || b.current.ID != old {
			delete(b.byID, old)
		}
	}
	b.mu.Unlock()
}

// Status is the command's status.
func (c *BashCommand) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// ExitCode is the exit code once finished (a negative signal number when
// a signal ended it).
func (c *BashCommand) ExitCode() *int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exit == nil {
		return nil
	}
	v := *c.exit
	return &v
}

// Done is closed when the command has finished.
func (c *BashCommand) Done() <-chan struct{} { return c.done }

// Signal asks for the command to be signalled (SIGKILL kills its whole
// tree).
func (c *BashCommand) Signal(sig syscall.Signal) {
	select {
	case c.kill <- sig:
	case <-c.done:
	default:
	}
}

// WriteStdin writes input to the command's stdin.
func (c *BashCommand) WriteStdin(input []byte) error {
	select {
	case <-c.done:
		return fault.New(fault.Conflict, "the command has finished")
	default:
	}
	if c.proc.Stdin == nil {
		return fault.New(fault.Conflict, "the command has no stdin")
	}
	select {
	case c.stdin <- struct{}{}:
	default:
		return fault.New(fault.Conflict, "an earlier write to this command's stdin is still pending")
	}
	res := make(chan error, 1)
	go func() {
		_, err := c.proc.Stdin.Write(input)
		// Release the slot before answering: the caller's next write may
		// arrive as soon as this one is reported done.
		<-c.stdin
		res <- err
	}()
	select {
	case err := <-res:
		if err != nil {
			return fault.Wrap(fault.Conflict, err, "the command's stdin is closed")
		}
		return nil
	case <-time.After(stdinTimeout):
		return fault.New(fault.Conflict, "the command is not reading its stdin; the write is still pending")
	}
}

// command returns the named command, or the current one when id is "".
func (b *BashSession) command(id string) (*BashCommand, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastUsed = time.Now()
	if id == "" {
		if b.current == nil {
			return nil, fault.New(fault.NotFound, "no command has run in this session")
		}
		return b.current, nil
	}
	c := b.byID[id]
	if c == nil {
		return nil, fault.New(fault.NotFound, "command not found")
	}
	return c, nil
}

// close kills every running command and marks the session closed.
// Busy reports a command running (sessions.Session).
func (b *BashSession) Busy() bool {
	_, running := b.idle()
	return running
}

// LastUsed is when a client last used the session (sessions.Session).
func (b *BashSession) LastUsed() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastUsed
}

// Ended is false: a bash session has no process of its own
// (sessions.Session).
func (b *BashSession) Ended() bool { return false }

// Close kills the session's running commands (sessions.Session).
func (b *BashSession) Close() { b.close() }

func (b *BashSession) close() {
	b.mu.Lock()
	b.closed = true
	cmds := make([]*BashCommand, 0, len(b.byID))
	for _, c := range b.byID {
		cmds = append(cmds, c)
	}
	b.mu.Unlock()
	for _, c := range cmds {
		c.Signal(syscall.SIGKILL)
	}
}

// BashInfo is AIO's BashSessionInfo.
type BashInfo struct {
	SessionID      string    `json:"session_id"`
	Status         string    `json:"status"`
	WorkingDir     string    `json:"working_dir"`
	CreatedAt      time.Time `json:"created_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
	CurrentCommand *string   `json:"current_command"`
	CommandCount   int       `json:"command_count"`
}

// Info reports the session.
func (b *BashSession) Info() BashInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	in := BashInfo{SessionID: b.ID, Status: "ready", WorkingDir: b.workDir, CreatedAt: b.Created, LastUsedAt: b.lastUsed, CommandCount: b.count}
	if b.closed {
		in.Status = "closed"
	}
	if b.current != nil && b.current.Status() == BashRunning {
		cmd := b.current.Command
		in.CurrentCommand = &cmd
	}
	return in
}

func (b *BashSession) idle() (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	running := false
	for _, c := range b.byID {
		if c.Status() == BashRunning {
			running = true
		}
	}
	return time.Since(b.lastUsed), running
}
