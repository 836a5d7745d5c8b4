package shell_test

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/testenv"
)

// term is a test client speaking AIO's terminal protocol.
type term struct {
	t    *testing.T
	conn *websocket.Conn
	id   string
	seen strings.Builder // output received so far
}

type wsMsg struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// dialTerm connects to path (query included) with key as a header (or
// none when key is "") and reads the greeting up to "ready".
// dialResult is what the handshake answered (the response itself is
// closed by dialTerm).
type dialResult struct {
	StatusCode int
	Header     http.Header
}

func (s *srv) dialTerm(t *testing.T, key, query string) (*term, *dialResult, error) {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.base, "http")+"/v1/shell/ws"+query, &websocket.DialOptions{HTTPHeader: h})
	var res *dialResult
	if resp != nil {
		res = &dialResult{StatusCode: resp.StatusCode, Header: resp.Header}
		if resp.Body != nil {
			_ = resp.Body.Close()
		}
	}
	if err != nil {
		return nil, res, err
	}
	conn.SetReadLimit(1 << 20)
	tm := &term{t: t, conn: conn}
	for {
		m := tm.read()
		switch m.Type {
		case "session_id":
			_ = json.Unmarshal(m.Data, &tm.id)
		case "output":
			var s string
			_ = json.Unmarshal(m.Data, &s)
			tm.seen.WriteString(s)
		case "ready":
			if tm.id == "" {
				t.Fatal("ready before session_id")
			}
			return tm, res, nil
		}
	}
}

func (tm *term) read() wsMsg {
	tm.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, b, err := tm.conn.Read(ctx)
	if err != nil {
		tm.t.Fatalf("read: %v", err)
	}
	var m wsMsg
	if err := json.Unmarshal(b, &m); err != nil {
		tm.t.Fatalf("message %q: %v", b, err)
	}
	return m
}

func (tm *term) send(typ string, data any) {
	tm.t.Helper()
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	if err := tm.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		tm.t.Fatalf("write: %v", err)
	}
}

// expect reads output until it holds want.
func (tm *term) expect(want string) {
	tm.t.Helper()
	for !strings.Contains(tm.seen.String(), want) {
		m := tm.read()
		if m.Type == "output" {
			var s string
			_ = json.Unmarshal(m.Data, &s)
			tm.seen.WriteString(s)
		}
	}
}

func TestTerminal(t *testing.T) {
	// Rate limits on: the terminal cap is one of them.
	s := startServer(t, func(c *config.Config) { c.DisableRateLimit = false })

	t.Run("input-output-resize-reattach", func(t *testing.T) {
		tm, _, err := s.dialTerm(t, s.key, "")
		if err != nil {
			t.Fatal(err)
		}
		// The echo of the line holds the quotes; only the output joins them.
		tm.send("input", "export KEEP=kept; echo hel''lo-$((6*7))\r")
		tm.expect("hello-42")
		tm.send("resize", map[string]int{"cols": 123, "rows": 45})
		tm.send("input", "stty size\r")
		tm.expect("45 123")
		tm.send("ping", 1)
		_ = tm.conn.Close(websocket.StatusNormalClosure, "bye")

		again, _, err := s.dialTerm(t, s.key, "?session_id="+tm.id)
		if err != nil {
			t.Fatal(err)
		}
		if again.id != tm.id || !strings.Contains(again.seen.String(), "hello-42") {
			t.Fatalf("reattach: id %s (want %s), history %q", again.id, tm.id, again.seen.String())
		}
		again.send("input", "echo \"v=$KEEP\"\r")
		again.expect("v=kept")
		_ = again.conn.Close(websocket.StatusNormalClosure, "bye")
	})

	t.Run("ticket-auth-and-unknown-session", func(t *testing.T) {
		rt := s.do("POST", "/v1/tickets", map[string]string{"scope": "terminal"})
		if rt.status != 201 {
			t.Fatalf("ticket: %d %s", rt.status, rt.raw)
		}
		r := rt.data()
		tm, _, err := s.dialTerm(t, "", "?ticket="+r["ticket"].(string))
		if err != nil {
			t.Fatalf("dial with ticket: %v", err)
		}
		_ = tm.conn.Close(websocket.StatusNormalClosure, "bye")
		// A ticket is single use.
		if _, res, err := s.dialTerm(t, "", "?ticket="+r["ticket"].(string)); err == nil || res == nil || res.StatusCode != 401 {
			t.Fatalf("reused ticket: %v %v", err, res)
		}
		if _, res, err := s.dialTerm(t, s.key, "?session_id=nope"); err == nil || res == nil || res.StatusCode != 404 {
			t.Fatalf("unknown session: %v %v", err, res)
		}
	})

	t.Run("five-terminals-per-key", func(t *testing.T) {
		key := s.newKey("five", "agent")
		var open []*term
		for i := 0; i < 5; i++ {
			tm, _, err := s.dialTerm(t, key, "")
			if err != nil {
				t.Fatalf("terminal %d: %v", i+1, err)
			}
			open = append(open, tm)
		}
		_, res, err := s.dialTerm(t, key, "")
		if err == nil || res == nil || res.StatusCode != 429 || res.Header.Get("Retry-After") == "" {
			t.Fatalf("sixth terminal: %v %v", err, res)
		}
		// Another key is not affected.
		other, _, err := s.dialTerm(t, s.newKey("other", "agent"), "")
		if err != nil {
			t.Fatalf("other key: %v", err)
		}
		_ = other.conn.Close(websocket.StatusNormalClosure, "bye")
		// Closing one frees a slot.
		_ = open[0].conn.Close(websocket.StatusNormalClosure, "bye")
		var tm *term
		testenv.Eventually(t, "slot freed", func() bool {
			var err error
			tm, _, err = s.dialTerm(t, key, "")
			return err == nil
		})
		_ = tm.conn.Close(websocket.StatusNormalClosure, "bye")
		for _, o := range open[1:] {
			_ = o.conn.Close(websocket.StatusNormalClosure, "bye")
		}
	})

	t.Run("revoking-the-key-ends-the-terminal", func(t *testing.T) {
		r := s.do("POST", "/v1/keys", map[string]string{"name": "revoked", "role": "agent"})
		kd := r.data()
		tm, _, err := s.dialTerm(t, kd["key"].(string), "")
		if err != nil {
			t.Fatal(err)
		}
		if r := s.do("DELETE", "/v1/keys/"+kd["id"].(string), nil); r.status != 200 {
			t.Fatalf("revoke: %d %s", r.status, r.raw)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for {
			if _, _, err := tm.conn.Read(ctx); err != nil {
				if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
					t.Fatalf("closed with %v", err)
				}
				return
			}
		}
	})

	t.Run("flood-keeps-server-memory-bounded", func(t *testing.T) {
		tm, _, err := s.dialTerm(t, s.key, "")
		if err != nil {
			t.Fatal(err)
		}
		heap := func() uint64 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapAlloc
		}
		base := heap()
		// 2 GB of output: far more than the server could hold.
		tm.send("input", "head -c 2000000000 /dev/zero | tr '\\0' x; echo FLOOD-END\r")
		// The client reads nothing for a while: the PTY must stall, not
		// the server's heap grow.
		time.Sleep(3 * time.Second)
		stalled := heap()
		// Then it reads 64 MB slowly.
		var got int
		readStart := time.Now()
		for got < 64<<20 {
			m := tm.read()
			got += len(m.Data)
		}
		took := time.Since(readStart)
		reading := heap()
		t.Logf("heap: base %d KiB, stalled client %d KiB, after reading %d MiB %d KiB (read at %.0f MiB/s)",
			base>>10, stalled>>10, got>>20, reading>>10, float64(got>>20)/took.Seconds())
		const bound = 32 << 20
		if stalled > base+bound || reading > base+bound {
			t.Fatalf("server heap grew past %d MiB under a flood: base %d, stalled %d, reading %d", bound>>20, base, stalled, reading)
		}
		_ = tm.conn.Close(websocket.StatusNormalClosure, "bye")
		ok(t, s.do("DELETE", "/v1/shell/sessions/"+tm.id, nil))
	})
}
