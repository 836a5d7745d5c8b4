package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// maxShellMessage bounds one message from the server's terminal (output
// arrives in PTY-read-sized chunks; a larger one is not a terminal).
const maxShellMessage = 4 << 20

// Size is a terminal's size.
type Size struct{ Rows, Cols int }

// ShellOptions wire an interactive session.
type ShellOptions struct {
	// Stdin is sent to the sandbox's terminal as it is read (raw bytes:
	// Ctrl-C is a byte like any other and reaches the sandbox).
	Stdin io.Reader
	// Stdout receives the terminal's output.
	Stdout io.Writer
	// Size is the initial size (zero: the server's default).
	Size Size
	// Resize delivers new sizes (SIGWINCH); may be nil.
	Resize <-chan Size
	// SessionID reattaches to an existing session.
	SessionID string
	// DetachKeys, when set, are the input bytes that leave the session
	// running and end the client (DefaultDetachKeys); they are not sent.
	DetachKeys []byte
}

// DefaultDetachKeys are Ctrl-P Ctrl-Q, Docker's: leave the shell running
// and return to the local terminal.
var DefaultDetachKeys = []byte{0x10, 0x11}

// ShellEnd is how a terminal session ended for the client.
type ShellEnd struct {
	// SessionID is the server's session (reattach with it).
	SessionID string
	// Detached is true when the user left it running (DetachKeys).
	Detached bool
}

// errDetached ends the read loop when the user detaches.
var errDetached = errors.New("detached")

// detachScanner finds the detach keys in the input, holding back a partial
// match until the next read shows whether it completes.
type detachScanner struct {
	keys []byte
	held int
}

// feed returns the bytes to send and whether the keys were typed.
func (d *detachScanner) feed(p []byte) ([]byte, bool) {
	if len(d.keys) == 0 {
		return p, false
	}
	var out []byte
	for _, b := range p {
		if b == d.keys[d.held] {
			if d.held++; d.held == len(d.keys) {
				return out, true
			}
			continue
		}
		out = append(out, d.keys[:d.held]...)
		d.held = 0
		if b == d.keys[0] {
			d.held = 1
			continue
		}
		out = append(out, b)
	}
	return out, false
}

// shellMsg is one message of AIO's terminal protocol.
type shellMsg struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Shell opens an interactive terminal in sandbox sb over the server's
// WebSocket /v1/shell/ws (AIO's protocol) and runs it until the session
// ends, the server closes it, the user detaches, or ctx is done. The key
// goes in the Authorization header of the upgrade (a client that can send
// headers needs no ticket, and nothing lands in a URL). The session's id
// is in the ShellEnd whatever the error.
func (c *Client) Shell(ctx context.Context, sb string, o ShellOptions) (end ShellEnd, _ error) {
	q := url.Values{}
	if o.Size.Rows > 0 && o.Size.Cols > 0 {
		q.Set("rows", strconv.Itoa(o.Size.Rows))
		q.Set("cols", strconv.Itoa(o.Size.Cols))
	}
	if o.SessionID != "" {
		q.Set("session_id", o.SessionID)
	}
	u := c.url(aioPath(sb)+"/v1/shell/ws", q)
	u = "ws" + strings.TrimPrefix(u, "http") // http→ws, https→wss
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+c.key)
	hdr.Set("User-Agent", c.UserAgent)
	conn, res, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: hdr, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
			defer func() { _ = res.Body.Close() }()
			return end, notFound(errorFrom(res), "sandbox "+Escape(sb))
		}
		return end, c.transportError(err)
	}
	defer func() { _ = conn.CloseNow() }()
	conn.SetReadLimit(maxShellMessage)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	send := func(m any) error {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return conn.Write(ctx, websocket.MessageText, b)
	}
	// Input: raw bytes as binary frames (the server writes them to the PTY
	// as they are; no UTF-8 round trip).
	go func() {
		buf := make([]byte, 32<<10)
		keys := &detachScanner{keys: o.DetachKeys}
		for {
			n, err := o.Stdin.Read(buf)
			if n > 0 {
				in, detach := keys.feed(buf[:n])
				if len(in) > 0 {
					if werr := conn.Write(ctx, websocket.MessageBinary, in); werr != nil {
						cancel(werr)
						return
					}
				}
				if detach {
					cancel(errDetached)
					return
				}
			}
			if err != nil {
				// End of input (a pipe): the session goes on until the
				// server ends it, as with ssh -T.
				return
			}
		}
	}()
	if o.Resize != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case s := <-o.Resize:
					if s.Rows > 0 && s.Cols > 0 {
						_ = send(map[string]any{"type": "resize", "data": map[string]int{"rows": s.Rows, "cols": s.Cols}})
					}
				}
			}
		}()
	}
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			switch st := websocket.CloseStatus(err); {
			case st == websocket.StatusNormalClosure:
				return end, nil
			case st != -1:
				var ce websocket.CloseError
				if errors.As(err, &ce) && ce.Reason != "" {
					return end, fmt.Errorf("the server closed the terminal: %s", oneLine(ce.Reason))
				}
				return end, fmt.Errorf("the server closed the terminal (status %d)", st)
			}
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				switch {
				case errors.Is(cause, errDetached):
					end.Detached = true
					_ = conn.Close(websocket.StatusNormalClosure, "detached")
					return end, nil
				case errors.Is(cause, context.Canceled):
					return end, cause
				}
				return end, fmt.Errorf("terminal input: %w", cause)
			}
			return end, fmt.Errorf("the terminal connection was lost: %w", err)
		}
		var m shellMsg
		if err := json.Unmarshal(b, &m); err != nil {
			continue // not ours to interpret
		}
		switch m.Type {
		case "session_id":
			var id string
			if json.Unmarshal(m.Data, &id) == nil {
				end.SessionID = id
			}
		case "output":
			var s string
			if json.Unmarshal(m.Data, &s) == nil {
				if _, err := io.WriteString(o.Stdout, s); err != nil {
					return end, err
				}
			}
		case "ping":
			_ = send(shellMsg{Type: "pong", Data: m.Data})
		case "error":
			var s string
			_ = json.Unmarshal(m.Data, &s)
			// Shown in the terminal, escaped: it is the server's text.
			if _, err := fmt.Fprintf(o.Stdout, "\r\n[sandhold: %s]\r\n", oneLine(s)); err != nil {
				return end, err
			}
		}
	}
}
