package cluster_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/store"
)

// logBuf is a node's log output, safe for the daemon's writers and the
// test's reader.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// browserRelaysThroughAnotherNode drives the DevTools and VNC relays of a
// sandbox on owner through via (a node that does not run it): the
// DevTools URLs point at via, a DevTools WebSocket runs Browser.getVersion,
// the desktop's RFB handshake completes with a ticket minted through via,
// and a revocation on revoker closes both forwarded sessions.
// It returns the (revoked) key it used.
func browserRelaysThroughAnotherNode(t *testing.T, via, revoker node, owner, admin string, st *store.Postgres) string {
	if err := browser.Available(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var bk struct{ ID, Key string }
	via.ok("POST", "/v1/keys", admin, map[string]string{"name": "browser-agent", "role": "agent"}, 201, &bk)
	// Placement is by load: create until one lands on the owner.
	id := ""
	for range 4 {
		var sb struct{ ID string }
		via.ok("POST", "/v1/sandboxes", bk.Key, map[string]any{}, 201, &sb)
		if n, err := st.SandboxNode(ctx, sb.ID); err == nil && n == owner {
			id = sb.ID
			break
		}
	}
	if id == "" {
		t.Fatalf("no sandbox of four landed on %s", owner)
	}
	host := strings.TrimPrefix(via.base, "http://")

	// The desktop first (it starts the browser headful), with a ticket
	// minted through via: the owner must accept it.
	var tk struct {
		Ticket string `json:"ticket"`
	}
	via.ok("POST", "/v1/tickets", bk.Key, map[string]string{"scope": "vnc"}, 201, &tk)
	vnc, resp, err := websocket.Dial(ctx, "ws://"+host+"/sandboxes/"+id+"/vnc/websockify?ticket="+url.QueryEscape(tk.Ticket),
		&websocket.DialOptions{Subprotocols: []string{"binary"}})
	var body []byte
	if resp != nil && resp.Body != nil {
		body, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("desktop through %s: %v %s", via.base, err, body)
	}
	defer func() { _ = vnc.CloseNow() }()
	if got := vnc.Subprotocol(); got != "binary" {
		t.Fatalf("desktop subprotocol %q through a forwarding node", got)
	}
	vnc.SetReadLimit(64 << 20)
	rfb := websocket.NetConn(ctx, vnc, websocket.MessageBinary)
	w, h := rfbHandshake(t, rfb)
	t.Logf("RFB handshake through %s with a sandbox on %s: desktop %dx%d", via.base, owner, w, h)
	// The ticket was spent: a second use is refused.
	_, resp, err = websocket.Dial(ctx, "ws://"+host+"/sandboxes/"+id+"/vnc/websockify?ticket="+url.QueryEscape(tk.Ticket), nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a spent ticket through another node: %v %v", resp, err)
	}

	// DevTools: the version answer's URL points at the node the client
	// used, and a WebSocket to it runs a command.
	code, page := via.raw("GET", "/sandboxes/"+id+"/cdp/json/version", bk.Key, nil, nil)
	var v struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	if code != 200 || json.Unmarshal([]byte(page), &v) != nil {
		t.Fatalf("DevTools version through %s: %d %s", via.base, code, page)
	}
	want := "ws://" + host + "/sandboxes/" + id + "/cdp/devtools/browser/"
	if !strings.HasPrefix(v.WS, want) {
		t.Fatalf("debugger URL %q, want one under %s (the node the client used)", v.WS, want)
	}
	code, page = via.raw("GET", "/sandboxes/"+id+"/cdp/json/list", bk.Key, nil, nil)
	if code != 200 || !strings.Contains(page, "ws://"+host+"/sandboxes/"+id+"/cdp/devtools/page/") ||
		strings.Contains(strings.ReplaceAll(page, host+"/sandboxes/"+id+"/cdp/", ""), "127.0.0.1:") {
		t.Fatalf("DevTools page list through %s: %d %s (an in-sandbox address leaked)", via.base, code, page)
	}
	cdp, resp, err := websocket.Dial(ctx, v.WS, &websocket.DialOptions{HTTPHeader: http.Header{"X-API-Key": {bk.Key}}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("DevTools WebSocket through %s: %v", via.base, err)
	}
	defer func() { _ = cdp.CloseNow() }()
	cdp.SetReadLimit(16 << 20)
	if err := cdp.Write(ctx, websocket.MessageText, []byte(`{"id":1,"method":"Browser.getVersion"}`)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := cdp.Read(ctx)
	if err != nil || !strings.Contains(string(msg), `"product":"Chrome/`) {
		t.Fatalf("Browser.getVersion through %s: %s %v", via.base, msg, err)
	}

	// A revocation on a third node closes both forwarded sessions.
	t0 := time.Now()
	revoker.ok("DELETE", "/v1/keys/"+bk.ID, admin, nil, 200, nil)
	var wg sync.WaitGroup
	closed := make([]time.Duration, 2)
	for i, read := range []func() error{
		func() error { _, _, err := cdp.Read(ctx); return err },
		func() error { _, err := rfb.Read(make([]byte, 64<<10)); return err },
	} {
		wg.Go(func() {
			for read() == nil {
			}
			closed[i] = time.Since(t0)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("a revocation on %s left a forwarded session open (closed after %v)", revoker.base, closed)
	}
	t.Logf("revocation on %s closed the forwarded DevTools session after %v, the desktop after %v", revoker.base, closed[0], closed[1])
	return bk.Key
}

// rfbHandshake runs RFB 3.8 with security None and returns the desktop's
// size.
func rfbHandshake(t *testing.T, rfb io.ReadWriter) (w, h uint16) {
	t.Helper()
	read := func(n int) []byte {
		b := make([]byte, n)
		if _, err := io.ReadFull(rfb, b); err != nil {
			t.Fatalf("read %d bytes of RFB: %v", n, err)
		}
		return b
	}
	write := func(b []byte) {
		if _, err := rfb.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if v := string(read(12)); !strings.HasPrefix(v, "RFB 003.") {
		t.Fatalf("server version %q", v)
	}
	write([]byte("RFB 003.008\n"))
	if types := read(int(read(1)[0])); !slices.Contains(types, 1) {
		t.Fatalf("security types %v lack None", types)
	}
	write([]byte{1})
	if res := binary.BigEndian.Uint32(read(4)); res != 0 {
		t.Fatalf("security result %d", res)
	}
	write([]byte{1}) // shared
	init := read(24)
	read(int(binary.BigEndian.Uint32(init[20:24]))) // desktop name
	w, h = binary.BigEndian.Uint16(init[0:2]), binary.BigEndian.Uint16(init[2:4])
	if w == 0 || h == 0 {
		t.Fatalf("desktop %dx%d", w, h)
	}
	return w, h
}

// approvalAcrossNodes: a call that needs approval, asked through ask for a
// sandbox on another node, approved through decide, runs once; every node
// lists the same approvals.
func approvalAcrossNodes(t *testing.T, ask, decide node, all []node, sandboxID, agentKey, admin string) {
	t.Helper()
	// Flagged (a credential read): needs an approval. It counts its runs
	// in the sandbox's workspace.
	flagged := map[string]any{"command": "cat ~/.ssh/id_rsa 2>/dev/null; echo ran >> /workspace/approved-runs; echo approved-ran"}
	exec := "/v1/sandboxes/" + sandboxID + "/exec"
	// The default policy: an agent's flagged command waits for approval.
	st, data := ask.do("POST", exec, agentKey, flagged)
	var d struct {
		ApprovalID string `json:"approval_id"`
		Status     string
	}
	if st != http.StatusAccepted || json.Unmarshal(data, &d) != nil || d.ApprovalID == "" || d.Status != "pending" {
		t.Fatalf("a flagged call through %s = %d %s, want 202 pending", ask.base, st, data)
	}
	id := d.ApprovalID
	sameList := func(want string) {
		t.Helper()
		var first []string
		for i, n := range all {
			var list []struct{ ID, Status string }
			n.ok("GET", "/v1/approvals", admin, nil, 200, &list)
			var got []string
			for _, a := range list {
				got = append(got, a.ID+"="+a.Status)
			}
			slices.Sort(got)
			if !slices.Contains(got, id+"="+want) {
				t.Fatalf("approvals through %s = %v, want %s %s", n.base, got, id, want)
			}
			if i == 0 {
				first = got
			} else if !slices.Equal(got, first) {
				t.Fatalf("approvals through %s = %v, through %s = %v", n.base, got, all[0].base, first)
			}
		}
	}
	sameList("pending")
	decide.ok("POST", "/v1/approvals/"+id+"/approve", admin, map[string]any{"note": "across nodes"}, 200, nil)
	sameList("approved")
	var res struct {
		Stdout string `json:"stdout"`
	}
	ask.ok("POST", exec, agentKey, flagged, 200, &res)
	if !strings.Contains(res.Stdout, "approved-ran") {
		t.Fatalf("approved call through %s: %+v", ask.base, res)
	}
	// Single use on every node: the identical call through the deciding
	// node needs a new approval.
	if st, data := decide.do("POST", exec, agentKey, flagged); st != http.StatusAccepted {
		t.Fatalf("the approved call again, through %s = %d %s", decide.base, st, data)
	}
	ask.ok("POST", exec, agentKey, map[string]any{"command": "wc -l < /workspace/approved-runs"}, 200, &res)
	if strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("the approved call ran %q times, want 1", strings.TrimSpace(res.Stdout))
	}
}
