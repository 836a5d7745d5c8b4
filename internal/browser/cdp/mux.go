package cdp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Mux shares one browser connection (a Pipe) among many clients, each of
// which sees a DevTools connection of its own.
//
// A client of the browser endpoint gets a browser session of its own
// (Target.attachToBrowserTarget: a session with the browser's whole
// protocol, domains enabled for it alone); a client of a page endpoint gets
// a session attached to that target. Every message a client sends goes
// out on its session (its sessionId added when it names none) or on a
// session it attached itself (flattened: Target.attachToTarget, auto-attach
// — learnt from the browser's Target.attachedToTarget events and attach
// answers); a message naming anyone else's session is answered with the
// browser's own "session not found" error and never sent. The browser's
// messages go to the client that owns their session, with the sessionId of
// its own session removed, so each client speaks the protocol exactly as
// over a WebSocket of its own. Command ids need no rewriting: an answer
// comes back on the session its command went out on.
//
// What it stops: a client reaching another's sessions; a slow client
// holding the browser — each client has a queue of at most
// maxClientQueue bytes, and a client that falls further behind is closed
// (the reader never blocks); a message over MaxMessage ends the browser
// connection.
type Mux struct {
	pipe   *Pipe
	nextID atomic.Int64
	done   chan struct{}
	// queueCap is maxClientQueue (tests lower it).
	queueCap int

	// mu guards pending, owners, err.
	mu      sync.Mutex
	pending map[int64]chan message
	// owners maps every live session id to the client that owns it: its
	// own session and those it attached.
	owners map[string]*Conn
	err    error
}

// maxClientQueue bounds what one client may have unread.
const maxClientQueue = 64 << 20

// NewMux serves p's browser to clients; it reads p until p ends.
func NewMux(p *Pipe) *Mux {
	m := &Mux{pipe: p, done: make(chan struct{}), queueCap: maxClientQueue, pending: map[int64]chan message{}, owners: map[string]*Conn{}}
	go m.read()
	return m
}

// Done is closed when the browser connection has ended.
func (m *Mux) Done() <-chan struct{} { return m.done }

// Err is why the connection ended (nil while it is open).
func (m *Mux) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Close ends the browser connection and every client's session.
func (m *Mux) Close() error {
	err := m.pipe.Close()
	m.finish(ErrClosed)
	return err
}

// Call sends a command on the browser's root session and decodes its
// result (nil: ignored). A browser error is an *Error.
func (m *Mux) Call(ctx context.Context, method string, params, result any) error {
	id := m.nextID.Add(1)
	data, err := encodeCall(id, "", method, params)
	if err != nil {
		return err
	}
	ch := make(chan message, 1)
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return ErrClosed
	}
	m.pending[id] = ch
	m.mu.Unlock()
	forget := func() {
		m.mu.Lock()
		delete(m.pending, id)
		m.mu.Unlock()
	}
	if err := m.pipe.Write(data); err != nil {
		forget()
		m.finish(err)
		return err
	}
	return awaitAnswer(ctx, ch, forget, m.Err, method, result)
}

// Open starts a client: a browser session of its own (targetID "") or a
// session attached to the target targetID.
func (m *Mux) Open(ctx context.Context, targetID string) (*Conn, error) {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	var err error
	if targetID == "" {
		err = m.Call(ctx, "Target.attachToBrowserTarget", nil, &res)
	} else {
		err = m.Call(ctx, "Target.attachToTarget", map[string]any{"targetId": targetID, "flatten": true}, &res)
	}
	if err != nil {
		return nil, err
	}
	if res.SessionID == "" {
		return nil, errors.New("cdp: the browser answered no session")
	}
	s := &Conn{m: m, id: res.SessionID, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if _, taken := m.owners[s.id]; taken {
		m.mu.Unlock()
		return nil, errors.New("cdp: the browser answered a session that is taken")
	}
	m.owners[s.id] = s
	m.mu.Unlock()
	return s, nil
}

// frame is the part of a message the mux reads to route it.
type frame struct {
	ID        *int64          `json:"id"`
	SessionID string          `json:"sessionId"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
}

// read routes the browser's messages until the pipe ends.
func (m *Mux) read() {
	for {
		data, err := m.pipe.Read()
		if err != nil {
			m.finish(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
		var f frame
		if json.Unmarshal(data, &f) != nil {
			continue // not a protocol message; nobody waits on it
		}
		if f.SessionID == "" {
			if f.ID != nil {
				var msg message
				if json.Unmarshal(data, &msg) == nil {
					m.mu.Lock()
					ch := m.pending[*f.ID]
					delete(m.pending, *f.ID)
					m.mu.Unlock()
					if ch != nil {
						ch <- msg // buffered 1
					}
				}
			}
			if f.Method == "Target.detachedFromTarget" {
				m.detached(f.Params) // a page client's target went away
			}
			continue // the root session's other events: nobody asked for them
		}
		m.route(f, data)
	}
}

// route hands a session's message to the client that owns the session,
// learning the sessions it attaches.
func (m *Mux) route(f frame, data []byte) {
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	m.mu.Lock()
	owner := m.owners[f.SessionID]
	if owner != nil {
		switch {
		case f.Method == "Target.attachedToTarget" && json.Unmarshal(f.Params, &attached) == nil:
		case f.ID != nil && len(f.Result) > 0 && json.Unmarshal(f.Result, &attached) == nil:
			// An attach answer (attachToTarget, attachToBrowserTarget).
		default:
			attached.SessionID = ""
		}
		if attached.SessionID != "" {
			if _, taken := m.owners[attached.SessionID]; !taken {
				m.owners[attached.SessionID] = owner
			}
		}
	}
	m.mu.Unlock()
	if owner == nil {
		return // a session nobody owns (closed meanwhile)
	}
	if f.Method == "Target.detachedFromTarget" {
		var d struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(f.Params, &d) == nil && d.SessionID != "" && d.SessionID != owner.id {
			m.mu.Lock()
			if m.owners[d.SessionID] == owner {
				delete(m.owners, d.SessionID)
			}
			m.mu.Unlock()
		}
	}
	if f.SessionID == owner.id {
		// The client's own session: as over a connection of its own,
		// without a sessionId.
		var all map[string]json.RawMessage
		if json.Unmarshal(data, &all) != nil {
			return
		}
		delete(all, "sessionId")
		b, err := encode(all)
		if err != nil {
			return
		}
		data = b
	}
	owner.deliver(data)
}

// detached ends the client whose own session the browser detached (its
// page closed), as the browser closes a page's WebSocket.
func (m *Mux) detached(params json.RawMessage) {
	var d struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(params, &d) != nil {
		return
	}
	m.mu.Lock()
	c := m.owners[d.SessionID]
	m.mu.Unlock()
	if c != nil && c.id == d.SessionID {
		c.gone()
	}
}

func (m *Mux) finish(err error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return
	}
	m.err = err
	close(m.done)
	for id, ch := range m.pending {
		ch <- message{ID: id, Error: &Error{Code: -1, Message: "connection closed"}}
		delete(m.pending, id)
	}
	clients := map[*Conn]struct{}{}
	for _, s := range m.owners {
		clients[s] = struct{}{}
	}
	clear(m.owners)
	m.mu.Unlock()
	for s := range clients {
		s.end(ErrClosed)
	}
}

// Conn is one client of a Mux: a DevTools connection of its own over
// the shared browser connection.
type Conn struct {
	m  *Mux
	id string

	// mu guards queue, queued and err.
	mu     sync.Mutex
	queue  [][]byte
	queued int
	err    error
	wake   chan struct{}
	closed chan struct{}
	once   sync.Once
}

// deliver queues a message for the client; a client too far behind is
// ended.
func (s *Conn) deliver(data []byte) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if s.queued+len(data) > s.m.queueCap {
		s.mu.Unlock()
		s.end(errors.New("cdp: the client did not read its messages in time"))
		return
	}
	s.queue = append(s.queue, data)
	s.queued += len(data)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Read returns the next message for the client.
func (s *Conn) Read(ctx context.Context) ([]byte, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			b := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.queued -= len(b)
			s.mu.Unlock()
			return b, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.wake:
		case <-s.closed:
		}
	}
}

// outgoing is a client's command, re-encoded with the session it goes on.
type outgoing struct {
	ID        int64           `json:"id"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params,omitempty"`
}

// Write sends a client's command. A command naming a session the client
// does not own is answered as the browser answers an unknown session.
func (s *Conn) Write(data []byte) error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return err
	}
	var c struct {
		ID        *int64          `json:"id"`
		SessionID *string         `json:"sessionId"`
		Method    string          `json:"method"`
		Params    json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &c) != nil || c.ID == nil || c.Method == "" {
		return errors.New("cdp: a client sent something that is not a command")
	}
	out := outgoing{ID: *c.ID, Method: c.Method, Params: c.Params, SessionID: s.id}
	if c.SessionID != nil && *c.SessionID != "" {
		s.m.mu.Lock()
		mine := s.m.owners[*c.SessionID] == s
		s.m.mu.Unlock()
		if !mine {
			refusal := map[string]any{"id": *c.ID, "sessionId": *c.SessionID,
				"error": map[string]any{"code": -32001, "message": "Session with given id not found."}}
			b, _ := encode(refusal)
			s.deliver(b)
			return nil
		}
		out.SessionID = *c.SessionID
	}
	b, err := encode(out)
	if err != nil {
		return err
	}
	if err := s.m.pipe.Write(b); err != nil {
		s.m.finish(err)
		return err
	}
	return nil
}

// Close ends the client.
func (s *Conn) Close() error {
	s.end(ErrClosed)
	return nil
}

// end ends the client with err (once) and tells the browser to detach
// its session (which ends the ones it attached below it).
func (s *Conn) end(err error) { s.stop(err, true) }

// gone ends the client whose session the browser ended itself.
func (s *Conn) gone() { s.stop(ErrClosed, false) }

func (s *Conn) stop(err error, detach bool) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.queue, s.queued = nil, 0
		s.mu.Unlock()
		close(s.closed)
		m := s.m
		m.mu.Lock()
		open := m.err == nil
		for id, c := range m.owners {
			if c == s {
				delete(m.owners, id)
			}
		}
		m.mu.Unlock()
		if open && detach {
			// Not waited for: the answer comes on the root session and is
			// of no use.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
				defer cancel()
				_ = m.Call(ctx, "Target.detachFromTarget", map[string]any{"sessionId": s.id}, nil)
			}()
		}
	})
}

// Done is closed when the client has ended.
func (s *Conn) Done() <-chan struct{} { return s.closed }

// encode is json.Marshal without HTML escaping: a relayed message keeps
// the browser's bytes.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
