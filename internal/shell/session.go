package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/outbuf"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Statuses of a shell command (AIO's BashCommandStatus).
const (
	StatusRunning  = "running"
	StatusDone     = "completed"
	StatusNoChange = "no_change_timeout"
	StatusHard     = "hard_timeout"
	StatusKilled   = "terminated"
)

// Kinds of session.
const (
	// KindExec sessions run commands sent by the API: no echo, no prompt,
	// completion detected by markers.
	KindExec = "exec"
	// KindTerminal sessions are interactive bash with readline and a
	// prompt, for a live terminal.
	KindTerminal = "terminal"
)

// Limits of a session, with their reasons.
const (
	// MaxOutputChars is AIO's truncation of a shell command's output.
	MaxOutputChars = 30_000
	// DefaultNoChange is AIO's default no_change_timeout.
	DefaultNoChange = 120 * time.Second
	// keepTruncated is what the server keeps of one command's output when
	// the response is truncated anyway (head and tail, see outbuf.Output).
	keepTruncated = 64 << 10
	// keepFull is what it keeps when the caller asked for no truncation:
	// memory per command stays bounded whatever the command prints.
	keepFull = 1 << 20
	// scrollKeep is the terminal history kept per session, replayed to a
	// terminal that reattaches.
	scrollKeep = 64 << 10
	// markerMax bounds a marker (nonce, id, status, working directory);
	// a record separator not closed within it is plain output.
	markerMax = 8 << 10
	// lineChunk is the longest piece of a command sent on one line: a
	// terminal in canonical mode drops input past 4095 bytes per line.
	lineChunk = 3000
	// maxLine is the longest line the server types into a shell: below
	// the 4095 bytes a terminal in canonical mode keeps of one.
	maxLine = 4000
	// maxCommandBytes caps a command (as exec does).
	maxCommandBytes = 128 << 10
	// MaxInputBytes caps one write of input to a session.
	MaxInputBytes = 64 << 10
	// readyTimeout bounds the start of a session's shell: a shell starts
	// in milliseconds, but on a host loaded far past its CPUs (measured:
	// load 80 on 2 CPUs) it took more than 15 s; the caller's own
	// deadline still ends the wait earlier.
	readyTimeout = 60 * time.Second
	// startRetry is the Retry-After (seconds) of a shell that could not
	// start: the host is overloaded, or the sandbox stopped.
	startRetry = 5
	// killTick and killTicks pace stopping a command: SIGINT, then SIGKILL
	// to the foreground group, repeated; after that the session dies.
	killTick  = 250 * time.Millisecond
	killTicks = 16
	// subQueue is how many output chunks wait for a live terminal before
	// the PTY reader blocks (backpressure).
	subQueue = 8
	// readChunk is one PTY read.
	readChunk = 32 << 10
	// writeTimeout bounds how long a request waits for a terminal to take
	// its input.
	writeTimeout = 10 * time.Second
	// exec sessions get a wide terminal so programs do not wrap output.
	execRows, execCols = 50, 200
)

// Session is one PTY shell inside a sandbox.
type Session struct {
	ID      string
	Sandbox string
	Owner   string
	Kind    string
	Created time.Time

	proc  *sandbox.Proc
	nonce string
	// onFinish is told about every command that ends (set before the
	// session is shared; called without mu).
	onFinish func(c *command, status string, exit *int)
	ready    chan struct{}
	exited   chan struct{}

	// reader-goroutine state (only the reader touches these).
	carry   []byte
	isReady bool

	// writing is a one-slot semaphore: one write to the PTY at a time.
	writing chan struct{}
	// in is the raw input clients type (shell.write, the terminal):
	// what they submit is admitted line by line (inputgate.go).
	in inputGate

	// mu guards the fields below.
	mu         sync.Mutex
	lastUsed   time.Time
	cwd        string
	noChange   time.Duration
	cur        *command // the current or last command
	seq        int
	sub        *subscriber
	terminated bool
	scroll     *outbuf.Output
	// claimed: made for a call that has not sent its command yet (an
	// implicit session); busy until then, so no cap evicts it first.
	claimed bool
}

// command is one command line sent to an exec session.
type command struct {
	id      string
	text    string
	out     *outbuf.Output
	started time.Time
	done    chan struct{}
	hard    *time.Timer

	// guarded by the session's mu:
	lastOut  time.Time
	status   string
	exit     *int
	stopping string // the status a stop in progress will give
}

// subscriber is a live terminal receiving output.
type subscriber struct {
	ch   chan []byte
	gone chan struct{}
	once sync.Once
}

func (s *subscriber) close() { s.once.Do(func() { close(s.gone) }) }

func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// defaultSignals starts a program with every signal at its default
// disposition. The sandbox's init ignores SIGINT, SIGTERM, SIGHUP, SIGPIPE
// and others for itself, and ignored signals survive exec: without this a
// shell's Ctrl-C, a pipeline's SIGPIPE and a script's trap would not work
// (coreutils env, 8.31 or later).
func defaultSignals() []string { return []string{"/usr/bin/env", "--default-signal"} }

// startSession spawns bash with a PTY in sb and waits for it to be ready.
func startSession(ctx context.Context, sb *sandbox.Sandbox, id, owner, kind, cwd string, privileged bool, rows, cols uint16) (*Session, error) {
	env := map[string]string{"PAGER": "cat", "GIT_PAGER": "cat", "HISTFILE": ""}
	argv := append(defaultSignals(), "/bin/bash", "--noprofile", "--norc", "-i")
	if kind == KindExec {
		argv = append(defaultSignals(), "/bin/bash", "--noprofile", "--norc", "--noediting", "-i")
		rows, cols = execRows, execCols
	} else {
		env["PS1"] = `\u@sandbox:\w\$ `
	}
	if rows == 0 || cols == 0 {
		rows, cols = 24, 80
	}
	p, err := sb.Spawn(context.WithoutCancel(ctx), sandbox.SpawnSpec{Argv: argv, Cwd: cwd, Env: env, TTY: true, Rows: rows, Cols: cols, PrivilegedEnv: privileged})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	s := &Session{
		ID: id, Sandbox: sb.ID(), Owner: owner, Kind: kind, Created: now,
		proc: p, nonce: newNonce(), ready: make(chan struct{}), exited: make(chan struct{}), writing: make(chan struct{}, 1),
		lastUsed: now, cwd: cwd, noChange: DefaultNoChange, scroll: sb.NewOutput(scrollKeep),
	}
	if kind == KindTerminal {
		s.isReady = true
		close(s.ready)
	}
	go s.readLoop()
	go s.watch()
	if kind == KindExec {
		// Until stty runs the terminal echoes this line; everything before
		// the first marker is discarded.
		setup := "stty -echo 2>/dev/null; PS1=''; PS2=''; unset HISTFILE; __sh_id=0; " +
			`PROMPT_COMMAND='__sh_rc=$?; printf "\036SH` + s.nonce + `:%s:%s:%s\037" "$__sh_id" "$__sh_rc" "$PWD"; __sh_id='` + "\n"
		if err := s.write([]byte(setup)); err != nil {
			s.Close()
			return nil, err
		}
	}
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-s.ready:
		return s, nil
	case <-s.exited:
		return nil, fault.WithRetryAfter(fault.Unavailable, startRetry, "the shell exited while starting")
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	case <-t.C:
		s.Close()
		return nil, fault.WithRetryAfter(fault.Unavailable, startRetry, "the shell did not start in time (the host is overloaded)")
	}
}

// watch ends the session when bash exits.
func (s *Session) watch() {
	<-s.proc.Exited()
	s.proc.Release()
	s.mu.Lock()
	s.terminated = true
	c := s.cur
	if c != nil && c.status == StatusRunning {
		c.status = StatusKilled
		if c.stopping != "" {
			c.status = c.stopping
		}
		s.finishLocked(c)
	}
	sub := s.sub
	s.sub = nil
	s.mu.Unlock()
	if sub != nil {
		sub.close()
	}
	close(s.exited)
}

// Close kills the session's whole process tree; the session's watcher
// then releases its execution group and ends its goroutines.
func (s *Session) Close() {
	if s.proc != nil {
		s.proc.Kill()
	}
}

// Busy reports a command running or a terminal attached (sessions.Session).
func (s *Session) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimed || s.sub != nil || (s.cur != nil && s.cur.status == StatusRunning)
}

// LastUsed is when a client last used the session (sessions.Session).
func (s *Session) LastUsed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUsed
}

// Ended reports that the shell exited (sessions.Session).
func (s *Session) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terminated
}

// Exited is closed when the session's shell has ended.
func (s *Session) Exited() <-chan struct{} { return s.exited }

func (s *Session) readLoop() {
	buf := make([]byte, readChunk)
	for {
		n, err := s.proc.PTY.Read(buf)
		if n > 0 {
			s.feed(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// feed splits PTY output into plain output and markers. Only the reader
// goroutine calls it.
func (s *Session) feed(p []byte) {
	data := p
	if len(s.carry) > 0 {
		data = append(s.carry, p...)
		s.carry = nil
	}
	if s.Kind != KindExec {
		s.emit(data)
		return
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, 0x1e)
		if i < 0 {
			s.emit(data)
			return
		}
		if i > 0 {
			s.emit(data[:i])
			data = data[i:]
		}
		j := bytes.IndexByte(data, 0x1f)
		if j < 0 {
			if len(data) < markerMax {
				s.carry = append([]byte(nil), data...)
				return
			}
			s.emit(data[:1])
			data = data[1:]
			continue
		}
		if s.marker(string(data[1:j])) {
			data = data[j+1:]
			continue
		}
		s.emit(data[:1])
		data = data[1:]
	}
}

// marker handles "SH<nonce>:<id>:<status>:<cwd>"; false if it is not one.
func (s *Session) marker(m string) bool {
	rest, ok := strings.CutPrefix(m, "SH"+s.nonce+":")
	if !ok {
		return false
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) != 3 {
		return false
	}
	id, cwd := parts[0], parts[2]
	rc, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	if !s.isReady {
		if id == "0" {
			s.isReady = true
			s.mu.Lock()
			s.cwd = cwd
			s.mu.Unlock()
			close(s.ready)
		}
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cwd = cwd
	c := s.cur
	if c != nil && id != "" && c.id == id && c.status == StatusRunning {
		c.status = StatusDone
		if c.stopping != "" {
			c.status = c.stopping
		}
		c.exit = &rc
		s.finishLocked(c)
	}
	return true
}

// finishLocked ends command c. Callers hold mu.
func (s *Session) finishLocked(c *command) {
	if c.hard != nil {
		c.hard.Stop()
	}
	c.out.Close()
	s.lastUsed = time.Now()
	select {
	case <-c.done:
	default:
		close(c.done)
		if s.onFinish != nil {
			// Not under mu: the audit log writes to disk.
			status, exit := c.status, c.exit
			go s.onFinish(c, status, exit)
		}
	}
}

// emit passes plain output on: to the running command, the scrollback and
// a live terminal. Sending to the terminal blocks while its queue is full:
// that is the backpressure on the PTY.
func (s *Session) emit(b []byte) {
	if !s.isReady || len(b) == 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	if c := s.cur; c != nil && c.status == StatusRunning {
		_, _ = c.out.Write(b)
		c.lastOut = now
	}
	_, _ = s.scroll.Write(b)
	sub := s.sub
	s.mu.Unlock()
	if sub == nil {
		return
	}
	chunk := append([]byte(nil), b...)
	select {
	case sub.ch <- chunk:
	case <-sub.gone:
	}
}

// write sends bytes to the terminal. A terminal whose program does not
// read its input blocks writes (the PTY cannot time them out): the write
// goes on in the background and the caller hears so after writeTimeout;
// until it completes, later writes are refused.
func (s *Session) write(b []byte) error {
	t := time.NewTimer(writeTimeout)
	defer t.Stop()
	select {
	case s.writing <- struct{}{}:
	case <-t.C:
		return fault.New(fault.Conflict, "an earlier input to this session is still pending: its program is not reading")
	case <-s.exited:
		return fault.New(fault.Conflict, "the session has ended")
	}
	res := make(chan error, 1)
	go func() {
		defer func() { <-s.writing }()
		_, err := s.proc.PTY.Write(b)
		res <- err
	}()
	select {
	case err := <-res:
		if err != nil {
			return fault.Wrap(fault.Conflict, err, "the session does not accept input")
		}
		return nil
	case <-t.C:
		return fault.New(fault.Conflict, "the session's program is not reading its input; the rest is written when it does")
	case <-s.exited:
		// The input may be what ended it (`exit 3`): a write that went
		// through counts, so the command is reported as terminated rather
		// than refused. A write to a PTY whose shell is gone returns at
		// once, so this wait is short.
		select {
		case err := <-res:
			if err == nil {
				return nil
			}
		case <-t.C:
		}
		return fault.New(fault.Conflict, "the session has ended")
	}
}

// ansiQuote renders b as bash $'…' pieces of printable ASCII, each at most
// lineChunk bytes long.
func ansiQuote(b string) []string {
	var out []string
	var cur strings.Builder
	cur.WriteString("$'")
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\'' || c == '\\':
			cur.WriteByte('\\')
			cur.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			cur.WriteByte(c)
		default:
			fmt.Fprintf(&cur, `\x%02x`, c)
		}
		if cur.Len() >= lineChunk {
			cur.WriteByte('\'')
			out = append(out, cur.String())
			cur.Reset()
			cur.WriteString("$'")
		}
	}
	cur.WriteByte('\'')
	return append(out, cur.String())
}

// commandLines is what start types into the shell for command id: the
// command assigned to __sh_c in pieces of at most lineChunk bytes, then
// __sh_id set and the command run with eval. The last piece shares the
// line that runs it when the two fit in maxLine: the shell then reads one
// line and runs its prompt (the marker) once per command, not once more
// for an assignment alone.
func commandLines(id string, o ExecOptions) string {
	var run strings.Builder
	run.WriteString("__sh_id=" + id + "; ")
	if o.Dir != "" {
		dir := ansiQuote(o.Dir)[0]
		if o.Strict {
			run.WriteString("cd -- " + dir + " && ")
		} else {
			run.WriteString("{ cd -- " + dir + "; } 2>/dev/null; ")
		}
	}
	run.WriteString(`eval "$__sh_c"` + "\n")
	var b strings.Builder
	pieces := ansiQuote(o.Command)
	for i, piece := range pieces {
		op := "+="
		if i == 0 {
			op = "="
		}
		b.WriteString("__sh_c" + op + piece)
		if i == len(pieces)-1 && len("__sh_c"+op+piece)+2+run.Len() <= maxLine {
			b.WriteString("; ")
			break
		}
		b.WriteString("\n")
	}
	b.WriteString(run.String())
	return b.String()
}

// ExecOptions is one command for an exec session.
type ExecOptions struct {
	Command string
	Dir     string
	Strict  bool
	// Truncate keeps the response within MaxOutputChars.
	Truncate bool
	// Hard kills the command after this long (0: never).
	Hard time.Duration
}

// start sends a command; it fails if one is running.
func (s *Session) start(o ExecOptions) (*command, error) {
	if s.Kind != KindExec {
		return nil, fault.New(fault.Conflict, "this session is an interactive terminal; send input to it instead")
	}
	if !s.in.idle() {
		// The shell would run the command after that text, as one line.
		return nil, fault.New(fault.Conflict, "a partial line of input waits in this session; end it with shell.write (Enter, or Ctrl-U to clear it) first")
	}
	keep := keepTruncated
	if !o.Truncate {
		keep = keepFull
	}
	s.mu.Lock()
	s.claimed = false // whatever happens next, the creating call is done with it
	if s.terminated {
		s.mu.Unlock()
		return nil, fault.New(fault.Conflict, "the session has ended")
	}
	if s.cur != nil && s.cur.status == StatusRunning {
		s.mu.Unlock()
		return nil, fault.New(fault.Conflict, "a command is still running in this session; wait for it, write to it or kill it")
	}
	s.seq++
	now := time.Now()
	c := &command{id: strconv.Itoa(s.seq), text: o.Command, out: s.proc.NewOutput(keep), started: now, done: make(chan struct{}),
		lastOut: now, status: StatusRunning}
	s.cur = c
	s.lastUsed = now
	s.mu.Unlock()

	if err := s.write([]byte(commandLines(c.id, o))); err != nil {
		s.mu.Lock()
		c.status = StatusKilled
		s.finishLocked(c)
		s.mu.Unlock()
		return nil, err
	}
	if o.Hard > 0 {
		s.mu.Lock()
		if c.status == StatusRunning {
			c.hard = time.AfterFunc(o.Hard, func() { s.stop(c, StatusHard) })
		}
		s.mu.Unlock()
	}
	return c, nil
}

// stop ends command c: SIGINT and SIGKILL to the terminal's foreground
// group in turn (SIGINT to the shell itself when it is in the foreground,
// running a builtin loop), and if the shell does not report the command
// ended, the whole session is killed. status is what the command reports.
func (s *Session) stop(c *command, status string) {
	s.mu.Lock()
	if c.status != StatusRunning || c.stopping != "" {
		s.mu.Unlock()
		return
	}
	c.stopping = status
	s.mu.Unlock()
	for k := 0; k < killTicks; k++ {
		select {
		case <-c.done:
			return
		default:
		}
		sig := syscall.SIGINT
		if k%2 == 1 {
			sig = syscall.SIGKILL
		}
		if leader, err := s.proc.SignalForeground(sig); err != nil || leader {
			_ = s.proc.Signal(syscall.SIGINT, false)
		}
		select {
		case <-c.done:
			return
		case <-time.After(killTick):
		}
	}
	s.Close()
}

// status is c's current status.
func (s *Session) status(c *command) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.status
}

// await waits for c to finish, for at most soft (0: no limit but max), or
// until it printed nothing for noChange. It returns the status to report.
// The quiet is counted from the later of c's last output and the start of
// this wait: a wait called after input (shell.write) gives the program
// noChange to answer it, however long it was quiet before.
func (s *Session) await(ctx context.Context, c *command, soft, noChange, max time.Duration) string {
	if soft <= 0 || soft > max {
		soft = max
	}
	begun := time.Now()
	deadline := time.NewTimer(soft)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return s.status(c)
		case <-ctx.Done():
			return StatusRunning
		case <-deadline.C:
			return s.status(c)
		case <-tick.C:
			s.mu.Lock()
			quiet := time.Since(latest(c.lastOut, begun))
			st := c.status
			s.mu.Unlock()
			if st == StatusRunning && noChange > 0 && quiet >= noChange {
				return StatusNoChange
			}
		}
	}
}

// current returns the current (or last) command.
func (s *Session) current() *command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *Session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// attach makes sub the session's live terminal, detaching an earlier one.
func (s *Session) attach() (*subscriber, error) {
	sub := &subscriber{ch: make(chan []byte, subQueue), gone: make(chan struct{})}
	s.mu.Lock()
	if s.terminated {
		s.mu.Unlock()
		return nil, fault.New(fault.Conflict, "the session has ended")
	}
	old := s.sub
	s.sub = sub
	s.lastUsed = time.Now()
	s.mu.Unlock()
	if old != nil {
		old.close()
	}
	return sub, nil
}

// detach removes sub if it is still attached.
func (s *Session) detach(sub *subscriber) {
	s.mu.Lock()
	if s.sub == sub {
		s.sub = nil
	}
	s.lastUsed = time.Now()
	s.mu.Unlock()
	sub.close()
}

// history returns the last n bytes of terminal output.
func (s *Session) history(n int64) []byte {
	total := s.scroll.Total()
	data, _, _ := s.scroll.ReadAt(max(total-n, 0), int(n))
	return data
}

// Info is a session as listed (AIO's ShellSessionInfo plus monitoring
// fields).
type Info struct {
	ID             string    `json:"session_id"`
	WorkingDir     string    `json:"working_dir"`
	CreatedAt      time.Time `json:"created_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
	AgeSeconds     int       `json:"age_seconds"`
	Status         string    `json:"status"`
	CurrentCommand *string   `json:"current_command"`
	Sandbox        string    `json:"sandbox"`
	Owner          string    `json:"owner"`
	Kind           string    `json:"kind"`
	IdleSeconds    int       `json:"idle_seconds"`
	Attached       bool      `json:"attached"`
}

// Info reports the session.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	in := Info{
		ID: s.ID, WorkingDir: s.cwd, CreatedAt: s.Created, LastUsedAt: s.lastUsed,
		AgeSeconds: int(now.Sub(s.Created).Seconds()), Status: "idle", Sandbox: s.Sandbox, Owner: s.Owner,
		Kind: s.Kind, IdleSeconds: int(now.Sub(s.lastUsed).Seconds()), Attached: s.sub != nil,
	}
	switch {
	case s.terminated:
		in.Status = StatusKilled
	case s.cur != nil && s.cur.status == StatusRunning:
		in.Status = StatusRunning
		cmd := s.cur.text
		in.CurrentCommand = &cmd
	case s.sub != nil:
		in.Status = "active"
	}
	return in
}

func (s *Session) workingDir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
