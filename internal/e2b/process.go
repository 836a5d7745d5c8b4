package e2b

import (
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/processpb"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/shell"
)

// Processes: envd's model of what runs in a sandbox. A process is started
// with sandbox.Spawn (its own execution group below the sandbox's, so its
// whole tree is killed at once), known by its pid inside the sandbox and
// an optional tag, and streamed to every client connected to it: the one
// that started it and any that connect later (Connect), each from the
// moment it joined — nothing is kept for later readers, so output costs no
// server memory beyond one event per subscriber. A subscriber that does
// not read holds the process's output back (the pipe fills, the process
// blocks on write), never the server's memory. A process outlives the
// client that started it until it ends, its timeout (the RPC's
// Connect-Timeout-Ms, as envd) kills it, the sandbox stops, or the key
// that started it is revoked. When its main process exits, what it left
// running is killed with its execution group (its pipes then close).

// Process settings, with their reasons.
const (
	// subBuffer is how many events wait for one subscriber before the
	// output pump waits for it.
	subBuffer = 64
	// readChunk is the most one output event carries.
	readChunk = 32 << 10
	// drainGrace bounds reading what a process wrote after its tree died.
	drainGrace = 2 * time.Second
	// stdinTimeout bounds a write to a process that does not read its
	// input.
	stdinTimeout = 10 * time.Second
	// untimedCap is the wall limit of a process that asked for none in a
	// sandbox that has no TTL to end it (SECURITY-RULES: at most 600 s).
	untimedCap = sandbox.MaxTimeout
	// maxTag bounds a process tag.
	maxTag = 256
)

type procKey struct {
	sandbox string
	pid     uint32
}

// procTable holds the processes started through the E2B API.
type procTable struct {
	// mu guards byKey and closed.
	mu     sync.Mutex
	byKey  map[procKey]*proc
	closed bool
}

func newProcTable() *procTable { return &procTable{byKey: map[procKey]*proc{}} }

// proc is one process.
type proc struct {
	key   procKey
	owner string // the key that started it
	tag   string
	cfg   *processpb.ProcessConfig
	sp    *sandbox.Proc
	tty   bool
	input *shell.RawInput
	// wmu serialises writes to the process's input (stdin pipe or PTY)
	// and guards stdinClosed.
	wmu         sync.Mutex
	stdinClosed bool

	// mu guards subs and end.
	mu   sync.Mutex
	subs map[*subscriber]struct{}
	end  *processpb.ProcessEvent_EndEvent
	done chan struct{}
	// reason is why sandhold ended it (timeout, revoked), for its status.
	reason string
}

// subscriber is one stream reading a process's events.
type subscriber struct {
	ch   chan *processpb.ProcessEvent
	gone chan struct{}
	once sync.Once
}

func (s *subscriber) leave() { s.once.Do(func() { close(s.gone) }) }

// startSpec is what start runs.
type startSpec struct {
	sandbox   *sandbox.Sandbox
	owner     string
	cfg       *processpb.ProcessConfig
	tag       string
	pty       *processpb.PTY
	stdin     bool
	sudo      bool
	admin     bool
	timeout   time.Duration // 0: none asked for
	subscribe bool
}

// start spawns a process, registers it and starts its pumps; with
// subscribe, the starter is subscribed before any output is read.
func (t *procTable) start(ctx context.Context, sp startSpec) (*proc, *subscriber, error) {
	if len(sp.tag) > maxTag {
		return nil, nil, fault.InvalidField("tag", "tag longer than 256 bytes")
	}
	argv := append([]string{sp.cfg.GetCmd()}, sp.cfg.GetArgs()...)
	spec := sandbox.SpawnSpec{Argv: argv, Cwd: sp.cfg.GetCwd(), Env: sp.cfg.GetEnvs(), PrivilegedEnv: sp.admin, Sudo: sp.sudo}
	if sp.pty != nil {
		spec.TTY = true
		spec.Rows, spec.Cols = dim(sp.pty.GetSize().GetRows(), 24), dim(sp.pty.GetSize().GetCols(), 80)
	} else {
		spec.Stdin = sp.stdin
	}
	timeout := sp.timeout
	if timeout == 0 && sp.sandbox.Info().Expires == nil {
		timeout = untimedCap
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, nil, fault.New(fault.Unavailable, "server is shutting down")
	}
	p, err := sp.sandbox.Spawn(context.WithoutCancel(ctx), spec)
	if err != nil {
		return nil, nil, err
	}
	pr := &proc{key: procKey{sandbox: sp.sandbox.ID(), pid: uint32(max(p.Pid, 0))}, owner: sp.owner, tag: sp.tag, //nolint:gosec // G115: a pid is positive
		cfg: sp.cfg, sp: p, tty: spec.TTY, input: shell.NewRawInput(spec.TTY),
		subs: map[*subscriber]struct{}{}, done: make(chan struct{})}
	if !spec.TTY && p.Stdin == nil {
		pr.stdinClosed = true
	}
	var sub *subscriber
	if sp.subscribe {
		sub = pr.subscribe()
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		p.Release()
		return nil, nil, fault.New(fault.Unavailable, "server is shutting down")
	}
	t.byKey[pr.key] = pr
	t.mu.Unlock()
	go pr.run(t, timeout)
	return pr, sub, nil
}

// dim is a terminal dimension, d when unset or out of range.
func dim(v uint32, d uint16) uint16 {
	if v == 0 || v > 1000 {
		return d
	}
	return uint16(v)
}

// run pumps the process's output to its subscribers until it ends, then
// sends the end event and forgets it.
func (pr *proc) run(t *procTable, timeout time.Duration) {
	var pumps sync.WaitGroup
	if pr.tty {
		pumps.Go(func() { pr.pump(pr.sp.PTY, func(b []byte) *processpb.ProcessEvent_DataEvent { return ptyData(b) }) })
	} else {
		pumps.Go(func() { pr.pump(pr.sp.Stdout, stdoutData) })
		pumps.Go(func() { pr.pump(pr.sp.Stderr, stderrData) })
	}
	var limit <-chan time.Time
	if timeout > 0 {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		limit = tm.C
	}
	var ex agent.Exit
wait:
	for {
		select {
		case ex = <-pr.sp.Exited():
			break wait
		case <-limit:
			limit = nil
			pr.kill("timeout")
		}
	}
	// The main process is gone: what it left behind goes too, which
	// closes the pipes.
	pr.sp.Kill()
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		pr.sp.Close()
		<-drained
	}
	pr.sp.Release()
	t.mu.Lock()
	if t.byKey[pr.key] == pr {
		delete(t.byKey, pr.key)
	}
	t.mu.Unlock()
	end := endEvent(ex, pr.why())
	pr.mu.Lock()
	pr.end = end
	subs := slices.Collect(maps.Keys(pr.subs))
	pr.mu.Unlock()
	ev := &processpb.ProcessEvent{Event: &processpb.ProcessEvent_End{End: end}}
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.gone:
		case <-time.After(drainGrace):
		}
	}
	close(pr.done)
}

func (pr *proc) why() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.reason
}

// kill ends the process's tree, noting why.
func (pr *proc) kill(reason string) {
	pr.mu.Lock()
	if pr.reason == "" {
		pr.reason = reason
	}
	pr.mu.Unlock()
	pr.sp.Kill()
}

// endEvent is envd's end event for an exit: the exit code (-1 when a
// signal ended it), whether it exited by itself, Go's ProcessState text,
// and an error for anything but a clean exit.
func endEvent(ex agent.Exit, reason string) *processpb.ProcessEvent_EndEvent {
	e := &processpb.ProcessEvent_EndEvent{ExitCode: int32(ex.Code), Exited: ex.Signal == 0} //nolint:gosec // G115: an exit status fits
	switch {
	case ex.Signal != 0:
		e.ExitCode = -1
		e.Status = "signal: " + signalName(ex.Signal)
	default:
		e.Status = "exit status " + strconv.Itoa(ex.Code)
	}
	if reason != "" {
		e.Status += " (" + reason + ")"
	}
	if e.ExitCode != 0 || !e.Exited {
		msg := e.Status
		e.Error = &msg
	}
	return e
}

func signalName(sig int) string {
	switch syscall.Signal(sig) {
	case syscall.SIGKILL:
		return "killed"
	case syscall.SIGTERM:
		return "terminated"
	case syscall.SIGINT:
		return "interrupt"
	case syscall.SIGXCPU:
		return "CPU time limit exceeded"
	}
	return strconv.Itoa(sig)
}

func stdoutData(b []byte) *processpb.ProcessEvent_DataEvent {
	return &processpb.ProcessEvent_DataEvent{Output: &processpb.ProcessEvent_DataEvent_Stdout{Stdout: b}}
}

func stderrData(b []byte) *processpb.ProcessEvent_DataEvent {
	return &processpb.ProcessEvent_DataEvent{Output: &processpb.ProcessEvent_DataEvent_Stderr{Stderr: b}}
}

func ptyData(b []byte) *processpb.ProcessEvent_DataEvent {
	return &processpb.ProcessEvent_DataEvent{Output: &processpb.ProcessEvent_DataEvent_Pty{Pty: b}}
}

// pump reads one output until EOF and hands each chunk to every
// subscriber, waiting for each (backpressure, not memory).
func (pr *proc) pump(f *os.File, wrap func([]byte) *processpb.ProcessEvent_DataEvent) {
	if f == nil {
		return
	}
	buf := make([]byte, readChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			ev := &processpb.ProcessEvent{Event: &processpb.ProcessEvent_Data{Data: wrap(slices.Clone(buf[:n]))}}
			pr.mu.Lock()
			subs := slices.Collect(maps.Keys(pr.subs))
			pr.mu.Unlock()
			for _, s := range subs {
				select {
				case s.ch <- ev:
				case <-s.gone:
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// subscribe adds a reader of the process's events from now on; a process
// that has ended gives a subscriber that gets its end event at once.
func (pr *proc) subscribe() *subscriber {
	s := &subscriber{ch: make(chan *processpb.ProcessEvent, subBuffer), gone: make(chan struct{})}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.end != nil {
		s.ch <- &processpb.ProcessEvent{Event: &processpb.ProcessEvent_End{End: pr.end}}
		return s
	}
	pr.subs[s] = struct{}{}
	return s
}

// unsubscribe removes s.
func (pr *proc) unsubscribe(s *subscriber) {
	s.leave()
	pr.mu.Lock()
	delete(pr.subs, s)
	pr.mu.Unlock()
}

// write writes in to the process's stdin (or terminal), bounded in time.
func (pr *proc) write(in []byte) error {
	pr.wmu.Lock()
	defer pr.wmu.Unlock()
	f := pr.sp.Stdin
	if pr.tty {
		f = pr.sp.PTY
	}
	if f == nil || pr.stdinClosed {
		return fault.New(fault.Conflict, "the process's stdin is closed (start it with stdin: true to write to it)")
	}
	select {
	case <-pr.done:
		return fault.New(fault.NotFound, "process not found")
	default:
	}
	res := make(chan error, 1)
	go func() {
		_, err := f.Write(in)
		res <- err
	}()
	select {
	case err := <-res:
		if err != nil {
			return fault.Wrap(fault.Conflict, err, "the process's stdin is closed")
		}
		return nil
	case <-time.After(stdinTimeout):
		if !pr.tty {
			// Closing the pipe ends the pending write: a process that
			// does not read for that long gets EOF, and no write is left
			// waiting behind it.
			pr.stdinClosed = true
			_ = f.Close()
		}
		return fault.New(fault.Conflict, "the process did not read its stdin for 10 s; the write was abandoned (and a pipe closed)")
	}
}

// closeStdin closes the process's stdin (EOF to the process).
func (pr *proc) closeStdin() error {
	if pr.tty {
		return fault.New(fault.Invalid, "a terminal has no stdin to close; send Ctrl-D (0x04) instead")
	}
	pr.wmu.Lock()
	defer pr.wmu.Unlock()
	if pr.stdinClosed || pr.sp.Stdin == nil {
		return nil
	}
	pr.stdinClosed = true
	return pr.sp.Stdin.Close()
}

// signal delivers envd's SIGTERM (to the process group) or SIGKILL (the
// whole tree).
func (pr *proc) signal(sig processpb.Signal) error {
	switch sig {
	case processpb.Signal_SIGNAL_SIGKILL:
		pr.kill("killed")
		return nil
	case processpb.Signal_SIGNAL_SIGTERM:
		if err := pr.sp.Signal(syscall.SIGTERM, true); err != nil {
			return fault.Wrap(fault.NotFound, err, "process not found")
		}
		return nil
	}
	return fault.InvalidField("signal", "signal must be SIGTERM or SIGKILL")
}

// info is the process as List shows it.
func (pr *proc) info() *processpb.ProcessInfo {
	in := &processpb.ProcessInfo{Config: pr.cfg, Pid: pr.key.pid}
	if pr.tag != "" {
		tag := pr.tag
		in.Tag = &tag
	}
	return in
}

// find returns the running process of sandboxID that sel names.
func (t *procTable) find(sandboxID string, sel *processpb.ProcessSelector) (*proc, error) {
	notFound := fault.New(fault.NotFound, "process not found")
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		if pr := t.byKey[procKey{sandbox: sandboxID, pid: s.Pid}]; pr != nil {
			return pr, nil
		}
	case *processpb.ProcessSelector_Tag:
		for k, pr := range t.byKey {
			if k.sandbox == sandboxID && pr.tag != "" && pr.tag == s.Tag {
				return pr, nil
			}
		}
	default:
		return nil, fault.InvalidField("process", "name the process by pid or tag")
	}
	return nil, notFound
}

// list returns sandboxID's running processes, by pid.
func (t *procTable) list(sandboxID string) []*processpb.ProcessInfo {
	t.mu.Lock()
	var prs []*proc
	for k, pr := range t.byKey {
		if k.sandbox == sandboxID {
			prs = append(prs, pr)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(prs, func(a, b *proc) int { return int(a.key.pid) - int(b.key.pid) })
	out := make([]*processpb.ProcessInfo, len(prs))
	for i, pr := range prs {
		out[i] = pr.info()
	}
	return out
}

// each calls fn for every process match selects.
func (t *procTable) each(match func(*proc) bool, fn func(*proc)) {
	t.mu.Lock()
	var prs []*proc
	for _, pr := range t.byKey {
		if match(pr) {
			prs = append(prs, pr)
		}
	}
	t.mu.Unlock()
	for _, pr := range prs {
		fn(pr)
	}
}

// revoke kills every process keyID started.
func (t *procTable) revoke(keyID string) {
	t.each(func(pr *proc) bool { return pr.owner == keyID }, func(pr *proc) { pr.kill("key revoked") })
}

// endSandbox kills every process of a sandbox that is stopping.
func (t *procTable) endSandbox(id string) {
	t.each(func(pr *proc) bool { return pr.key.sandbox == id }, func(pr *proc) { pr.kill("sandbox stopped") })
}

// closeAll kills every process and refuses new ones (server shutdown),
// waiting for each to be released.
func (t *procTable) closeAll() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	var prs []*proc
	t.each(func(*proc) bool { return true }, func(pr *proc) { prs = append(prs, pr); pr.kill("server stopping") })
	for _, pr := range prs {
		select {
		case <-pr.done:
		case <-time.After(2 * drainGrace):
		}
	}
}
