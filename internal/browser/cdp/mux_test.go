package cdp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBrowser speaks the pipe protocol as Chromium does, enough for the
// mux: browser sessions, flattened attaches with their events, detaches,
// an echo command, and "Test.flood" (n messages of size bytes).
type fakeBrowser struct {
	in  *io.PipeReader // what the mux writes (descriptor 3)
	out *io.PipeWriter // what the mux reads (descriptor 4)

	mu       sync.Mutex
	sessions map[string]bool
	seen     []map[string]any
	n        int
}

func newFakeBrowser(t *testing.T) (*fakeBrowser, *Mux) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	b := &fakeBrowser{in: inR, out: outW, sessions: map[string]bool{}}
	go b.serve()
	m := NewMux(NewPipe(inW, outR))
	t.Cleanup(func() { _ = m.Close(); _ = outW.Close() })
	return b, m
}

func (b *fakeBrowser) send(v map[string]any) {
	raw, _ := json.Marshal(v)
	_, _ = b.out.Write(append(raw, 0))
}

func (b *fakeBrowser) serve() {
	rd := bufio.NewReader(b.in)
	for {
		raw, err := rd.ReadBytes(0)
		if err != nil {
			return
		}
		var c map[string]any
		if json.Unmarshal(raw[:len(raw)-1], &c) != nil {
			continue
		}
		b.mu.Lock()
		b.seen = append(b.seen, c)
		b.mu.Unlock()
		id := c["id"]
		sid, _ := c["sessionId"].(string)
		params, _ := c["params"].(map[string]any)
		reply := map[string]any{"id": id}
		if sid != "" {
			reply["sessionId"] = sid
			b.mu.Lock()
			ok := b.sessions[sid]
			b.mu.Unlock()
			if !ok {
				reply["error"] = map[string]any{"code": -32001, "message": "Session with given id not found."}
				b.send(reply)
				continue
			}
		}
		newSession := func(prefix string) string {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.n++
			s := fmt.Sprintf("%s%d", prefix, b.n)
			b.sessions[s] = true
			return s
		}
		switch c["method"] {
		case "Target.attachToBrowserTarget":
			reply["result"] = map[string]any{"sessionId": newSession("B")}
		case "Target.attachToTarget":
			ns := newSession("T")
			if sid != "" {
				b.send(map[string]any{"method": "Target.attachedToTarget", "sessionId": sid, "params": map[string]any{"sessionId": ns}})
			}
			reply["result"] = map[string]any{"sessionId": ns}
		case "Target.detachFromTarget":
			b.mu.Lock()
			delete(b.sessions, params["sessionId"].(string))
			b.mu.Unlock()
			reply["result"] = map[string]any{}
		case "Test.flood":
			for range int(params["n"].(float64)) {
				b.send(map[string]any{"method": "Test.data", "sessionId": sid, "params": map[string]any{"x": strings.Repeat("x", int(params["size"].(float64)))}})
			}
			reply["result"] = map[string]any{}
		default:
			reply["result"] = map[string]any{"echo": c["method"], "session": sid}
		}
		b.send(reply)
	}
}

// sawOn reports whether the browser received method on session sid.
func (b *fakeBrowser) sawOn(method, sid string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.seen {
		got, _ := c["sessionId"].(string)
		if c["method"] == method && got == sid {
			return true
		}
	}
	return false
}

// answer reads c until the answer to id, returning it (events skipped).
func answer(t *testing.T, c *Conn, id int) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		raw, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if v, ok := m["id"].(float64); ok && int(v) == id {
			return m
		}
	}
}

func TestMuxGivesEachClientAConnectionOfItsOwn(t *testing.T) {
	b, m := newFakeBrowser(t)
	ctx := context.Background()
	a, err := m.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// The same command id from both: each gets its own answer, on its own
	// session, without a sessionId (as over a connection of its own).
	for _, x := range []*Conn{a, c} {
		if err := x.Write([]byte(`{"id":1,"method":"Browser.getVersion"}`)); err != nil {
			t.Fatal(err)
		}
		r := answer(t, x, 1)
		res, _ := r["result"].(map[string]any)
		if _, has := r["sessionId"]; has || res["session"] != x.id {
			t.Fatalf("answer %v on client %s", r, x.id)
		}
	}
	// a attaches a page (flattened): it may use that session, c may not.
	if err := a.Write([]byte(`{"id":2,"method":"Target.attachToTarget","params":{"targetId":"p","flatten":true}}`)); err != nil {
		t.Fatal(err)
	}
	child, _ := answer(t, a, 2)["result"].(map[string]any)["sessionId"].(string)
	if child == "" {
		t.Fatal("no child session")
	}
	if err := a.Write([]byte(`{"id":3,"method":"Page.navigate","sessionId":"` + child + `"}`)); err != nil {
		t.Fatal(err)
	}
	if r := answer(t, a, 3); r["sessionId"] != child || r["error"] != nil {
		t.Fatalf("a on its child session: %v", r)
	}
	if err := c.Write([]byte(`{"id":4,"method":"Runtime.evaluate","sessionId":"` + child + `"}`)); err != nil {
		t.Fatal(err)
	}
	if r := answer(t, c, 4); r["error"] == nil {
		t.Fatalf("c used a's session: %v", r)
	}
	if b.sawOn("Runtime.evaluate", child) {
		t.Fatal("another client's command on a's session reached the browser")
	}
	// Closing a detaches its session in the browser; c goes on.
	_ = a.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !b.sawOn("Target.detachFromTarget", "") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !b.sawOn("Target.detachFromTarget", "") {
		t.Fatal("closing a client did not detach its session")
	}
	if _, err := a.Read(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if err := c.Write([]byte(`{"id":5,"method":"Browser.getVersion"}`)); err != nil {
		t.Fatal(err)
	}
	answer(t, c, 5)
}

func TestMuxEndsASlowClientNotTheBrowser(t *testing.T) {
	_, m := newFakeBrowser(t)
	m.queueCap = 64 << 10
	ctx := context.Background()
	slow, err := m.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := m.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Write([]byte(`{"id":1,"method":"Test.flood","params":{"n":20,"size":8192}}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-slow.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a client that does not read was not ended")
	}
	if err := other.Write([]byte(`{"id":2,"method":"Browser.getVersion"}`)); err != nil {
		t.Fatal(err)
	}
	answer(t, other, 2)
}

func TestMuxEndsClientsWithTheBrowser(t *testing.T) {
	b, m := newFakeBrowser(t)
	c, err := m.Open(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	_ = b.out.Close() // the browser exits
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Read(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("a client's read after the browser ended: %v", err)
	}
	if err := m.Call(ctx, "Browser.getVersion", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("a call after the browser ended: %v", err)
	}
}

func TestPipeFrames(t *testing.T) {
	r, w := io.Pipe()
	p := NewPipe(nopCloser{io.Discard}, r)
	go func() {
		_, _ = w.Write([]byte("{\"a\":1}\x00" + `{"b":"` + strings.Repeat("y", 3*pipeReadBuffer) + "\"}\x00"))
		_ = w.Close()
	}()
	first, err := p.Read()
	if err != nil || string(first) != `{"a":1}` {
		t.Fatalf("first %q %v", first, err)
	}
	second, err := p.Read()
	if err != nil || len(second) != 3*pipeReadBuffer+8 {
		t.Fatalf("a message over the read buffer: %d bytes, %v", len(second), err)
	}
	if _, err := p.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
	if err := p.Write([]byte("a\x00b")); err == nil {
		t.Fatal("a message with a NUL was written")
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
