package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// ErrGone is returned for requests to an init that has exited.
// Callers branch on it to report the sandbox as stopped.
var ErrGone = errors.New("sandbox init is gone")

// Client is the server's end of the protocol with one init.
type Client struct {
	conn   *proto.Conn
	nextID atomic.Uint64
	done   chan struct{}
	// mu guards onConn, sleepGate, the sleep question, the tables of
	// waiting callers and the terminal error.
	mu sync.Mutex
	// onConn receives egress connections (EventConn); nil closes them. A
	// spare init's is set when it is bound (spare_linux.go).
	onConn func(*os.File)
	// sleepGate decides when an init that asked to sleep (EventSleep)
	// gets its leave (OpSleep); nil grants at once. Set like onConn.
	sleepGate func(grant func())
	// sleep is where the init's question to sleep stands (askedSleep);
	// sleepAgain: the init asked anew while its last leave was being
	// sent. Both guarded by mu.
	sleep      sleepState
	sleepAgain bool
	pending    map[uint64]chan reply
	exits      map[uint64]chan proto.Exit
	err        error
}

// sleepState is where an init's question to sleep stands.
type sleepState int

const (
	sleepNone    sleepState = iota // no question open
	sleepAsked                     // a question waits for the gate
	sleepSending                   // its leave is being sent
)

type reply struct {
	resp  proto.Response
	files []*os.File
}

// NewClient starts serving the protocol over conn. Done is closed when the
// connection ends.
func NewClient(conn *proto.Conn) *Client { return newClient(conn, nil, nil) }

func newClient(conn *proto.Conn, onConn func(*os.File), sleepGate func(func())) *Client {
	c := &Client{
		conn:      conn,
		onConn:    onConn,
		sleepGate: sleepGate,
		done:      make(chan struct{}),
		pending:   make(map[uint64]chan reply),
		exits:     make(map[uint64]chan proto.Exit),
	}
	go c.readLoop()
	return c
}

// setHooks sets where egress connections go and who grants sleeps (a
// spare's, at its bind).
func (c *Client) setHooks(onConn func(*os.File), sleepGate func(func())) {
	c.mu.Lock()
	c.onConn, c.sleepGate = onConn, sleepGate
	c.mu.Unlock()
}

// askedSleep answers an init's question whether it may sleep: by OpSleep,
// at once or when the gate grants it. One question per init is open at a
// time, so an init cannot make the gate hold more than one leave; and one
// leave is sent at a time, so an init that asks and does not read cannot
// make the server keep more than one send waiting on its socket. A
// question asked while the last leave is being sent is answered once it
// is, through the gate again.
func (c *Client) askedSleep() {
	c.mu.Lock()
	switch c.sleep {
	case sleepAsked:
		c.mu.Unlock()
		return
	case sleepSending:
		c.sleepAgain = true
		c.mu.Unlock()
		return
	}
	c.sleep = sleepAsked
	gate := c.sleepGate
	c.mu.Unlock()
	if gate == nil {
		c.grantSleep()
		return
	}
	gate(c.grantSleep)
}

// grantSleep sends the init its leave to sleep (the gate's grant).
func (c *Client) grantSleep() {
	c.mu.Lock()
	c.sleep = sleepSending
	c.mu.Unlock()
	err := c.conn.Send(proto.Request{Op: proto.OpSleep}) // an init gone is no matter
	c.mu.Lock()
	again := c.sleepAgain && err == nil
	c.sleep, c.sleepAgain = sleepNone, false
	c.mu.Unlock()
	if again {
		c.askedSleep()
	}
}

// Done is closed when the init is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, once Done is closed.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection; the init exits when it sees that.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) readLoop() {
	var err error
	for {
		var resp proto.Response
		var files []*os.File
		files, err = c.conn.Recv(&resp)
		if err != nil {
			break
		}
		if resp.Kind == proto.EventConn {
			c.mu.Lock()
			onConn := c.onConn
			c.mu.Unlock()
			if onConn != nil && len(files) == 1 {
				onConn(files[0])
			} else {
				proto.CloseAll(files)
			}
			continue
		}
		if resp.Kind == proto.EventSleep {
			proto.CloseAll(files)
			c.askedSleep()
			continue
		}
		c.mu.Lock()
		if resp.Kind == proto.EventExit {
			ch := c.exits[resp.ID]
			delete(c.exits, resp.ID)
			c.mu.Unlock()
			proto.CloseAll(files)
			if ch != nil && resp.Exit != nil {
				ch <- *resp.Exit
			}
			continue
		}
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ch == nil {
			proto.CloseAll(files) // a caller that gave up
			continue
		}
		ch <- reply{resp: resp, files: files}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %w", ErrGone, err)
	pending, exits := c.pending, c.exits
	c.pending, c.exits = nil, nil
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
	// Everything in the sandbox dies with its init.
	for _, ch := range exits {
		ch <- proto.Exit{Code: -1, Signal: 9}
	}
	close(c.done)
}

// call sends one request and waits for its reply. exit, when not nil, is
// registered for the exit event of a spawn before the request leaves.
func (c *Client) call(ctx context.Context, req proto.Request, files []*os.File, exit chan proto.Exit) (proto.Response, []*os.File, error) {
	return c.callThen(ctx, req, files, exit, nil)
}

// callThen is call with sent, if not nil, run once the request is sent
// and before the reply is awaited.
func (c *Client) callThen(ctx context.Context, req proto.Request, files []*os.File, exit chan proto.Exit, sent func()) (proto.Response, []*os.File, error) {
	req.ID = c.nextID.Add(1)
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		return proto.Response{}, nil, err
	}
	c.pending[req.ID] = ch
	if exit != nil {
		c.exits[req.ID] = exit
	}
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, req.ID)
			delete(c.exits, req.ID)
		}
		c.mu.Unlock()
	}
	if err := c.conn.Send(req, files...); err != nil {
		forget()
		return proto.Response{}, nil, fmt.Errorf("%w: %w", ErrGone, err)
	}
	if sent != nil {
		sent()
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return proto.Response{}, nil, c.Err()
		}
		if r.resp.Err != nil {
			proto.CloseAll(r.files)
			forget() // no exit event follows a failed spawn
			return r.resp, nil, r.resp.Err
		}
		return r.resp, r.files, nil
	case <-ctx.Done():
		forget()
		// A late reply's descriptors are closed by the read loop.
		return proto.Response{}, nil, ctx.Err()
	}
}

// Setup sends the one setup request with the workspace attached (the init
// binds it at /workspace), and after it a template root's writable layer
// and layers (Setup.Root); a request without exactly those descriptors
// ends the init. It returns the layers in force.
func (c *Client) Setup(ctx context.Context, s proto.Setup, files ...*os.File) (*proto.Ready, error) {
	resp, files, err := c.call(ctx, proto.Request{Op: proto.OpSetup, Setup: &s}, files, nil)
	proto.CloseAll(files)
	if err != nil {
		return nil, err
	}
	if resp.Ready == nil {
		return nil, errors.New("setup reply without layers")
	}
	return resp.Ready, nil
}

// Ping checks the init answers.
func (c *Client) Ping(ctx context.Context) error {
	_, files, err := c.call(ctx, proto.Request{Op: proto.OpPing}, nil, nil)
	proto.CloseAll(files)
	return err
}

// Process is a spawned process as the server holds it.
type Process struct {
	Pid int
	// Stdin is nil unless asked for; Stdout and Stderr are nil for a PTY,
	// whose master is PTY.
	Stdin, Stdout, Stderr, PTY *os.File
	// DevToolsIn writes to the process's descriptor 3 and DevToolsOut
	// reads its descriptor 4 (SpawnReq.DevToolsPipe; nil otherwise).
	DevToolsIn, DevToolsOut *os.File
	exit                    chan proto.Exit
}

// Exited delivers the process's exit exactly once.
func (p *Process) Exited() <-chan proto.Exit { return p.exit }

// Close closes the server's descriptors of the process.
func (p *Process) Close() {
	proto.CloseAll([]*os.File{p.Stdin, p.Stdout, p.Stderr, p.PTY, p.DevToolsIn, p.DevToolsOut})
}

// Spawn starts a process in the sandbox. cgroupFiles (the execution's
// group) and homeFiles (the sandbox's group) are attached for the init to
// place the process (see the package doc); they stay the caller's.
func (c *Client) Spawn(ctx context.Context, r proto.SpawnReq, cgroupFiles, homeFiles []*os.File) (*Process, error) {
	return c.spawn(ctx, r, cgroupFiles, homeFiles, nil, nil)
}

// SpawnHeld is Spawn for a command held until h is released (SpawnReq.Held):
// once the request is sent, release runs on the calling goroutine while
// the init prepares the command, and h ends with its result (nil releases
// the command). The reply comes once the command has started, or with
// CodeNotReleased. If the request cannot be sent, release does not run and
// h is left to the caller.
func (c *Client) SpawnHeld(ctx context.Context, r proto.SpawnReq, cgroupFiles, homeFiles []*os.File, h *Hold, release func() error) (*Process, error) {
	return c.spawn(ctx, r, cgroupFiles, homeFiles, h.Reader(), func() { h.End(release()) })
}

func (c *Client) spawn(ctx context.Context, r proto.SpawnReq, cgroupFiles, homeFiles []*os.File, hold *os.File, sent func()) (*Process, error) {
	r.CgroupFDs, r.HomeFDs = len(cgroupFiles), len(homeFiles)
	exit := make(chan proto.Exit, 1)
	attached := make([]*os.File, 0, len(cgroupFiles)+len(homeFiles)+1)
	attached = append(append(attached, cgroupFiles...), homeFiles...)
	if r.Held = hold != nil; r.Held {
		attached = append(attached, hold)
	}
	resp, files, err := c.callThen(ctx, proto.Request{Op: proto.OpSpawn, Spawn: &r}, attached, exit, sent)
	if err != nil {
		return nil, err
	}
	if resp.Spawn == nil {
		proto.CloseAll(files)
		return nil, errors.New("spawn reply without pid")
	}
	p := &Process{Pid: resp.Spawn.Pid, exit: exit}
	want := 2
	if r.Stdin {
		want = 3
	}
	if r.TTY {
		want = 1
	}
	if r.DevToolsPipe {
		want += 2
	}
	if len(files) != want {
		proto.CloseAll(files)
		return nil, fmt.Errorf("spawn reply carries %d descriptors, want %d", len(files), want)
	}
	if r.DevToolsPipe {
		p.DevToolsIn, p.DevToolsOut = files[want-2], files[want-1]
		files = files[:want-2]
	}
	switch {
	case r.TTY:
		p.PTY = files[0]
	case r.Stdin:
		p.Stdin, p.Stdout, p.Stderr = files[0], files[1], files[2]
	default:
		p.Stdout, p.Stderr = files[0], files[1]
	}
	return p, nil
}

// File runs one file primitive. For OpOpen and OpOpenRead the opened file
// is returned.
func (c *Client) File(ctx context.Context, op proto.Op, r proto.FileReq) (*proto.FileResp, *os.File, error) {
	if err := proto.CheckPath(r.Path); err != nil {
		return nil, nil, err
	}
	resp, files, err := c.call(ctx, proto.Request{Op: op, File: &r}, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	fr := resp.File
	if fr == nil {
		fr = &proto.FileResp{}
	}
	var f *os.File
	if op == proto.OpOpen || op == proto.OpOpenRead {
		if len(files) != 1 {
			proto.CloseAll(files)
			return nil, nil, errors.New("open reply without a descriptor")
		}
		f = files[0]
	} else {
		proto.CloseAll(files)
	}
	return fr, f, nil
}

// Dial returns a socket connected to 127.0.0.1:port inside the sandbox's
// network namespace (see sandboxinit/dial_linux.go); the caller owns it.
func (c *Client) Dial(ctx context.Context, port int) (*os.File, error) {
	if port < 1 || port > 65535 {
		return nil, &proto.Error{Code: proto.CodeInvalid, Msg: fmt.Sprintf("port %d is outside 1-65535", port)}
	}
	_, files, err := c.call(ctx, proto.Request{Op: proto.OpDial, Dial: &proto.DialReq{Port: port}}, nil, nil)
	if err != nil {
		return nil, err
	}
	if len(files) != 1 {
		proto.CloseAll(files)
		return nil, errors.New("dial reply without a descriptor")
	}
	return files[0], nil
}
