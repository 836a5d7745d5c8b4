package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Terminal protocol settings, with their reasons.
const (
	// pingEvery is AIO's application-level heartbeat.
	pingEvery = 30 * time.Second
	// wsWriteTimeout closes a connection whose client stops reading for
	// this long (its terminal slot is then free again).
	wsWriteTimeout = 60 * time.Second
	// wsReadLimit caps one client message: input is capped anyway.
	wsReadLimit = MaxInputBytes + 4<<10
	// historyReplay is what a reattaching terminal gets of earlier output.
	historyReplay = 16 << 10
	// maxDimension bounds rows and columns.
	maxDimension = 1000
)

// Terminal is a live terminal attached to a session: it holds one of the
// key's terminal slots until it ends.
type Terminal struct {
	Session  *Session
	Restored bool

	svc     *Service
	owner   string
	sub     *subscriber
	release func()
	// input writes what the client types: its lines are admitted first
	// (set by the shell.terminal tool; nil refuses input).
	input  func(ctx context.Context, b []byte) error
	ctx    context.Context
	cancel context.CancelCauseFunc
	once   sync.Once
}

// OpenTerminal attaches a live terminal to session id of sb (a new
// interactive session when id is ""). It takes one of the caller's
// terminal slots (ratelimit.Terminal); the caller must Serve or Close it.
func (s *Service) OpenTerminal(ctx context.Context, c auth.Caller, sb *sandbox.Sandbox, id string, rows, cols uint16) (*Terminal, error) {
	release := func() {}
	if s.opt.Limiter != nil {
		rel, dec := s.opt.Limiter.Acquire(c.KeyID, ratelimit.Terminal)
		if !dec.Allowed {
			return nil, &fault.Error{Kind: fault.RateLimited, RetryAfter: dec.RetryAfterSeconds(),
				Msg: fmt.Sprintf("at most %d live terminals per key; close one first", dec.Limit)}
		}
		release = rel
	}
	var x *Session
	var err error
	restored := false
	if id != "" {
		x, err = s.Session(c, sb, id)
		restored = true
	} else {
		x, err = s.CreateSession(ctx, c, sb, "", KindTerminal, "", 0, rows, cols)
	}
	if err != nil {
		release()
		return nil, err
	}
	if rows > 0 && cols > 0 {
		_ = x.proc.Resize(rows, cols)
	}
	sub, err := x.attach()
	if err != nil {
		release()
		return nil, err
	}
	tctx, cancel := context.WithCancelCause(context.Background())
	t := &Terminal{Session: x, Restored: restored, svc: s, owner: c.KeyID, sub: sub, release: release, ctx: tctx, cancel: cancel}
	s.track(t)
	return t, nil
}

// End stops the terminal's connection (revocation, shutdown); the session
// stays.
func (t *Terminal) End(reason string) { t.cancel(errors.New(reason)) }

// Close detaches the terminal and frees its slot.
func (t *Terminal) Close() {
	t.once.Do(func() {
		t.cancel(errors.New("closed"))
		t.Session.detach(t.sub)
		t.release()
		t.svc.untrack(t)
	})
}

// wsMessage is one message of AIO's terminal protocol, both directions.
type wsMessage struct {
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data,omitempty"`
	Timestamp json.RawMessage `json:"timestamp,omitempty"`
	// Cols and Rows are accepted at the top level of a resize too.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
}

type outMessage struct {
	Type      string `json:"type"`
	Data      any    `json:"data"`
	Timestamp any    `json:"timestamp,omitempty"`
}

// Serve runs AIO's terminal protocol on conn until the client leaves, the
// session ends, another terminal attaches, or End is called:
//
//	server: session_id, [terminal_restored], ready, output…, ping, pong, error
//	client: input, resize, ping, pong
//
// Output is sent as it comes; while the client is slow the session's
// queue fills and the PTY reader blocks (backpressure).
func (t *Terminal) Serve(ctx context.Context, conn *websocket.Conn) {
	defer t.Close()
	// Reads use the connection's own context: cancelling a read closes the
	// connection at once, and End must send a close frame first.
	readCtx := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-t.ctx.Done():
			cancel(context.Cause(t.ctx))
		case <-ctx.Done():
		}
	}()
	conn.SetReadLimit(wsReadLimit)
	send := func(m outMessage) error {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		// Not ctx: cancelling a write drops the connection without a close
		// frame, and End wants the client told why.
		wctx, wcancel := context.WithTimeout(context.Background(), wsWriteTimeout)
		defer wcancel()
		return conn.Write(wctx, websocket.MessageText, b)
	}
	x := t.Session
	if err := send(outMessage{Type: "session_id", Data: x.ID}); err != nil {
		return
	}
	if t.Restored {
		_ = send(outMessage{Type: "terminal_restored", Data: "Session " + x.ID + " restored"})
		if h := x.history(historyReplay); len(h) > 0 {
			_ = send(outMessage{Type: "output", Data: string(validPrefix(h))})
		}
	}
	if err := send(outMessage{Type: "ready", Data: "Terminal ready - Session: " + x.ID}); err != nil {
		return
	}
	go t.readLoop(readCtx, cancel, conn, send)

	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	var pending []byte // an incomplete UTF-8 sequence held for the next chunk
	for {
		select {
		case <-ctx.Done():
			reason := "closed"
			if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
				reason = c.Error()
			}
			_ = conn.Close(websocket.StatusPolicyViolation, reason)
			return
		case <-t.sub.gone:
			// Drain what was queued, then say why.
			for {
				select {
				case b := <-t.sub.ch:
					_ = send(outMessage{Type: "output", Data: string(b)})
					continue
				default:
				}
				break
			}
			// Ended (revocation: End comes before the session is
			// killed) is the reason, not the session killed with it —
			// asked first, as a select with both ready picks either.
			if t.ctx.Err() != nil {
				_ = conn.Close(websocket.StatusPolicyViolation, context.Cause(t.ctx).Error())
				return
			}
			select {
			case <-x.Exited():
				_ = conn.Close(websocket.StatusNormalClosure, "session ended")
			default:
				_ = conn.Close(websocket.StatusNormalClosure, "another terminal attached to this session")
			}
			return
		case b := <-t.sub.ch:
			x.touch()
			data := append(pending, b...)
			valid := validPrefix(data)
			pending = append([]byte(nil), data[len(valid):]...)
			if len(pending) > utf8.UTFMax {
				valid, pending = data, nil
			}
			if len(valid) == 0 {
				continue
			}
			if err := send(outMessage{Type: "output", Data: string(valid)}); err != nil {
				return
			}
		case now := <-ping.C:
			ms := now.UnixMilli()
			if err := send(outMessage{Type: "ping", Data: ms, Timestamp: ms}); err != nil {
				return
			}
		}
	}
}

// validPrefix is b without a trailing incomplete UTF-8 sequence.
func validPrefix(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		r := b[len(b)-i]
		if r < utf8.RuneSelf {
			return b
		}
		if utf8.RuneStart(r) {
			if utf8.FullRune(b[len(b)-i:]) {
				return b
			}
			return b[:len(b)-i]
		}
	}
	return b
}

func (t *Terminal) readLoop(ctx context.Context, cancel context.CancelCauseFunc, conn *websocket.Conn, send func(outMessage) error) {
	x := t.Session
	for {
		typ, b, err := conn.Read(ctx)
		if err != nil {
			cancel(nil)
			return
		}
		if typ != websocket.MessageText {
			// Binary frames are raw input.
			t.typed(ctx, b, send)
			continue
		}
		var m wsMessage
		if err := json.Unmarshal(b, &m); err != nil {
			_ = send(outMessage{Type: "error", Data: "message is not JSON"})
			continue
		}
		x.touch()
		switch m.Type {
		case "input":
			var in string
			if err := json.Unmarshal(m.Data, &in); err != nil {
				_ = send(outMessage{Type: "error", Data: "input data must be a string"})
				continue
			}
			t.typed(ctx, []byte(in), send)
		case "resize":
			var d struct {
				Cols int `json:"cols"`
				Rows int `json:"rows"`
			}
			if len(m.Data) > 0 {
				_ = json.Unmarshal(m.Data, &d)
			}
			if d.Cols == 0 && d.Rows == 0 {
				d.Cols, d.Rows = m.Cols, m.Rows
			}
			if d.Cols < 1 || d.Rows < 1 || d.Cols > maxDimension || d.Rows > maxDimension {
				_ = send(outMessage{Type: "error", Data: "resize needs cols and rows between 1 and 1000"})
				continue
			}
			if err := x.proc.Resize(uint16(d.Rows), uint16(d.Cols)); err != nil {
				_ = send(outMessage{Type: "error", Data: "resize failed"})
			}
		case "ping":
			var data any = time.Now().UnixMilli()
			if len(m.Data) > 0 {
				data = m.Data
			}
			_ = send(outMessage{Type: "pong", Data: data})
		case "pong":
		default:
			_ = send(outMessage{Type: "error", Data: "unknown message type"})
		}
	}
}

// typed writes what the client typed; a line that is refused (or waits
// for an operator) is not written, and the client is told why.
func (t *Terminal) typed(ctx context.Context, b []byte, send func(outMessage) error) {
	if t.input == nil {
		_ = send(outMessage{Type: "error", Data: "this terminal takes no input"})
		return
	}
	err := t.input(ctx, b)
	if err == nil {
		return
	}
	msg := fault.Public(err)
	var ar *dispatch.ApprovalRequired
	if errors.As(err, &ar) {
		msg = "the line waits for an operator's approval (" + ar.ID + "); press Enter again once it is approved, or Ctrl-U to clear it"
	}
	_ = send(outMessage{Type: "error", Data: msg})
}
