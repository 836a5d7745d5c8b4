// Package cdp is a small Chrome DevTools Protocol client: request ids,
// results, errors and events over one WebSocket, with targets attached as
// flattened sessions (Target.attachToTarget{flatten: true}) so one
// connection drives every tab.
//
// The connection is not dialled by this package: the caller hands it a
// function that opens a fresh net.Conn to the browser's DevTools HTTP
// port (inside a sandbox, that is the runtime's relay), so nothing here
// knows or resolves where the browser lives. Sessions implement
// github.com/chromedp/cdproto/cdp.Session, so the generated, typed
// commands of cdproto run on them (cdp.Call(ctx, s, page.Navigate, …)).
//
// What it stops: a browser (possibly running hostile pages) that floods
// the server — a message larger than MaxMessage ends the connection, and
// event subscribers hold at most SubscriptionBuffer events each (older
// ones are dropped, never blocking the reader). What it does not stop:
// anything the browser itself does; it is only a protocol client.
package cdp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/coder/websocket"
)

const (
	// MaxMessage caps one protocol message: a full-page screenshot of a
	// large page is the biggest honest one (base64 PNG); anything larger
	// is a browser gone wrong and ends the connection.
	MaxMessage = 64 << 20
	// SubscriptionBuffer is how many events one subscriber may have
	// unread before the oldest are dropped: the reader must never block
	// on a slow subscriber (command results travel on the same socket).
	SubscriptionBuffer = 1024
	// writeTimeout bounds sending one message.
	writeTimeout = 30 * time.Second
	// maxVersionBody caps the /json/version answer (a few hundred bytes).
	maxVersionBody = 64 << 10
)

// Dialer opens a fresh connection to the browser's DevTools HTTP port.
type Dialer func(ctx context.Context) (net.Conn, error)

// ErrClosed is returned by calls on a client whose connection has ended;
// callers branch on it to reconnect.
var ErrClosed = errors.New("cdp: connection closed")

// Error is an error answered by the browser for a command.
type Error struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"`
}

func (e *Error) Error() string {
	if e.Data != "" {
		return fmt.Sprintf("cdp error %d: %s (%s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("cdp error %d: %s", e.Code, e.Message)
}

// Version is the browser's /json/version answer.
type Version struct {
	Browser         string `json:"Browser"`
	ProtocolVersion string `json:"Protocol-Version"`
	UserAgent       string `json:"User-Agent"`
	WebSocketURL    string `json:"webSocketDebuggerUrl"`
}

type message struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *Error          `json:"error,omitempty"`
}

// rawValue hands a json.RawMessage on as a jsonv2.Value. On go1.27 the
// two are the same type (encoding/json's RawMessage is jsontext.Value);
// on go1.26 they are distinct named types. Both are assignable to and from
// []byte, so this compiles on either without a conversion a linter flags
// as unnecessary on one of them.
func rawValue(b []byte) jsonv2.Value { return b }

type subKey struct {
	session string
	method  string
}

type subscription struct {
	mu     sync.Mutex
	ch     chan jsonv2.Value
	closed bool
}

// deliver queues v, dropping the oldest queued event when full.
func (s *subscription) deliver(v jsonv2.Value) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for {
		select {
		case s.ch <- v:
			return
		default:
		}
		select {
		case <-s.ch:
		default:
		}
	}
}

func (s *subscription) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
}

// Client is one DevTools connection to a browser.
type Client struct {
	ws      *websocket.Conn
	version Version
	nextID  atomic.Int64
	done    chan struct{}

	// mu guards pending, subs, handlers and err.
	mu       sync.Mutex
	pending  map[int64]chan message
	subs     map[subKey][]*subscription
	handlers []func(session, method string, params jsonv2.Value)
	err      error
}

// Dial asks the browser for its WebSocket URL (/json/version) over one
// connection from dial and opens the browser-level WebSocket over another.
func Dial(ctx context.Context, dial Dialer) (*Client, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
		ForceAttemptHTTP2: false,
	}}
	defer hc.CloseIdleConnections()
	v, err := readVersion(ctx, hc)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(v.WebSocketURL)
	if err != nil || !strings.HasPrefix(u.Path, "/devtools/browser/") {
		return nil, fmt.Errorf("cdp: browser answered an unexpected WebSocket URL")
	}
	// Chromium refuses a Host that is neither an IP nor localhost (its
	// own DNS-rebinding check): the relay is reached as localhost.
	ws, _, err := websocket.Dial(ctx, "ws://localhost"+u.EscapedPath(), &websocket.DialOptions{HTTPClient: hc}) //nolint:bodyclose // websocket.Dial closes the body of a failed handshake
	if err != nil {
		return nil, fmt.Errorf("cdp: open the DevTools WebSocket: %w", err)
	}
	ws.SetReadLimit(MaxMessage)
	c := &Client{ws: ws, version: v, done: make(chan struct{}),
		pending: make(map[int64]chan message), subs: make(map[subKey][]*subscription)}
	go c.read() // #nosec G118 -- the reader lives as long as the connection, not the dial's context; Close ends it
	return c, nil
}

func readVersion(ctx context.Context, hc *http.Client) (Version, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/json/version", nil)
	if err != nil {
		return Version{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Version{}, fmt.Errorf("cdp: ask the browser for its version: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return Version{}, fmt.Errorf("cdp: /json/version answered %d", resp.StatusCode)
	}
	var v Version
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxVersionBody)).Decode(&v); err != nil {
		return Version{}, fmt.Errorf("cdp: read /json/version: %w", err)
	}
	return v, nil
}

// Version is the browser's version answer read when the client connected.
func (c *Client) Version() Version { return c.version }

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil while it is open).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection; pending calls fail with ErrClosed.
func (c *Client) Close() error {
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	c.finish(ErrClosed)
	return err
}

// OnEvent adds a handler that sees every event of every session, on the
// reader goroutine: it must not block or call the client.
func (c *Client) OnEvent(h func(session, method string, params jsonv2.Value)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers = append(c.handlers, h)
}

// Browser is the browser-level session (Target.*, Browser.*, Storage.*).
func (c *Client) Browser() *Session { return &Session{c: c} }

// Session is the flattened session id of an attached target.
func (c *Client) Session(id string) *Session { return &Session{c: c, id: id} }

func (c *Client) read() {
	ctx := context.Background()
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			c.finish(fmt.Errorf("%w: %w", ErrClosed, err))
			return
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			continue // not a protocol message; nothing waits on it
		}
		if m.ID != 0 {
			c.mu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m // buffered 1
			}
			continue
		}
		if m.Method == "" {
			continue
		}
		c.mu.Lock()
		subs := append([]*subscription(nil), c.subs[subKey{m.SessionID, m.Method}]...)
		handlers := c.handlers
		c.mu.Unlock()
		params := rawValue(m.Params)
		for _, s := range subs {
			s.deliver(params)
		}
		for _, h := range handlers {
			h(m.SessionID, m.Method, params)
		}
	}
}

func (c *Client) finish(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	for id, ch := range c.pending {
		ch <- message{ID: id, Error: &Error{Code: -1, Message: "connection closed"}}
		delete(c.pending, id)
	}
	for k, subs := range c.subs {
		for _, s := range subs {
			s.close()
		}
		delete(c.subs, k)
	}
}

// Session is one protocol session: the browser's ("") or an attached
// target's. It implements cdproto's cdp.Session.
type Session struct {
	c  *Client
	id string
}

var _ cdp.Session = (*Session)(nil)

// ID is the flattened session id ("" for the browser).
func (s *Session) ID() string { return s.id }

// Call sends method with params and decodes its result into result (nil:
// ignored). A browser error is an *Error; a closed connection ErrClosed.
func (s *Session) Call(ctx context.Context, method string, params, result any) error {
	c := s.c
	id := c.nextID.Add(1)
	data, err := encodeCall(id, s.id, method, params)
	if err != nil {
		return err
	}
	ch := make(chan message, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return ErrClosed
	}
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		forget()
		return err
	}
	// coder/websocket closes the whole connection when a write's context
	// ends: one cancelled call must not end every other one, so the write
	// gets its own deadline (a write stuck that long means the connection
	// is gone anyway).
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	err = c.ws.Write(wctx, websocket.MessageText, data)
	cancel()
	if err != nil {
		forget()
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return awaitAnswer(ctx, ch, forget, c.Err, method, result)
}

// encodeCall is the text of command id: method with params (encoded as
// cdproto's types expect) on session ("" the browser's).
func encodeCall(id int64, session, method string, params any) ([]byte, error) {
	m := message{ID: id, SessionID: session, Method: method}
	if params != nil {
		b, err := jsonv2.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("cdp: encode %s: %w", method, err)
		}
		m.Params = json.RawMessage(b)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("cdp: encode %s: %w", method, err)
	}
	return data, nil
}

// awaitAnswer waits for a command's answer on ch and decodes its result
// into result (nil: ignored). ctx ending forgets the call; the answer a
// closing connection makes up (code -1) is ErrClosed; the browser's
// refusal is an *Error.
func awaitAnswer(ctx context.Context, ch <-chan message, forget func(), closed func() error, method string, result any) error {
	select {
	case <-ctx.Done():
		forget()
		return ctx.Err()
	case r := <-ch:
		if r.Error != nil {
			if r.Error.Code == -1 && closed() != nil {
				return ErrClosed
			}
			return r.Error
		}
		if result == nil || len(r.Result) == 0 {
			return nil
		}
		if err := jsonv2.Unmarshal(r.Result, result); err != nil {
			return fmt.Errorf("cdp: decode %s result: %w", method, err)
		}
		return nil
	}
}

// Subscribe buffers the events of method on this session until cancel.
func (s *Session) Subscribe(method string) (<-chan jsonv2.Value, func()) {
	sub := &subscription{ch: make(chan jsonv2.Value, SubscriptionBuffer)}
	k := subKey{s.id, method}
	c := s.c
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		sub.close()
		return sub.ch, func() {}
	}
	c.subs[k] = append(c.subs[k], sub)
	c.mu.Unlock()
	var once sync.Once
	return sub.ch, func() {
		once.Do(func() {
			c.mu.Lock()
			list := c.subs[k]
			for i, x := range list {
				if x == sub {
					c.subs[k] = append(list[:i:i], list[i+1:]...)
					break
				}
			}
			if len(c.subs[k]) == 0 {
				delete(c.subs, k)
			}
			c.mu.Unlock()
			sub.close()
		})
	}
}
