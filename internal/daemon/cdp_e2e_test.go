package daemon_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// requireChromium skips where the host has no browser to run.
func requireChromium(t *testing.T) {
	t.Helper()
	daemontest.RequireSandboxes(t)
	if err := browser.Available(); err != nil {
		t.Skip(err)
	}
}

// cdpVersion fetches /json/version through the relay.
func cdpVersion(t *testing.T, c *daemontest.Client, id string) (string, daemontest.Reply) {
	t.Helper()
	r := c.Do("GET", "/sandboxes/"+id+"/cdp/json/version", nil)
	var v struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	if r.Status == http.StatusOK {
		if err := json.Unmarshal(r.Raw, &v); err != nil {
			t.Fatalf("version answer %s: %v", r.Raw, err)
		}
	}
	return v.WS, r
}

// dialCDP opens the DevTools WebSocket with key and checks one command.
func dialCDP(t *testing.T, ctx context.Context, wsURL, key string) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"X-API-Key": {key}}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("dial %s: %v", wsURL, err)
	}
	c.SetReadLimit(16 << 20)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"id":1,"method":"Browser.getVersion"}`)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(msg), `"product":"Chrome/`) {
		t.Fatalf("Browser.getVersion: %s, %v", msg, err)
	}
	return c
}

// waitClosed fails unless c is closed by the server within the context.
func waitClosed(t *testing.T, ctx context.Context, c *websocket.Conn, why string) {
	t.Helper()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("%s: the DevTools session stayed open", why)
			}
			return
		}
	}
}

func TestCDPRelayIsAuthenticatedScopedAndEndedByHaltAndRevocation(t *testing.T) {
	requireChromium(t)
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	ka := admin.NewKey("agent-a", "agent")
	a := admin.As(ka.Key)
	b := admin.As(admin.NewKey("agent-b", "agent").Key)
	id := a.NewSandbox(nil)

	ws, r := cdpVersion(t, a, id)
	want := "ws://" + d.Addr() + "/sandboxes/" + id + "/cdp/devtools/browser/"
	if r.Status != http.StatusOK || !strings.HasPrefix(ws, want) {
		t.Fatalf("version: %d %s (want a debugger URL under %s)", r.Status, r.Raw, want)
	}
	for _, tc := range []struct {
		name string
		c    *daemontest.Client
		want int
	}{
		{"no key", a.As(""), http.StatusUnauthorized},
		{"another key", b, http.StatusNotFound},
	} {
		if _, r := cdpVersion(t, tc.c, id); r.Status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, r.Status, r.Raw, tc.want)
		}
	}
	if r := a.Do("GET", "/sandboxes/"+id+"/cdp/other", nil); r.Status != http.StatusNotFound {
		t.Errorf("a path DevTools does not serve: %d", r.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The WebSocket without a credential is refused; another key's too.
	_, resp, err := websocket.Dial(ctx, ws, nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("websocket without a key: %v %v", resp, err)
	}

	// HALT closes the session.
	c := dialCDP(t, ctx, ws, ka.Key)
	admin.JSON("POST", "/v1/control/halt", map[string]any{"reason": "test"}, http.StatusOK, nil)
	waitClosed(t, ctx, c, "HALT")
	admin.JSON("POST", "/v1/control/unhalt", map[string]any{}, http.StatusOK, nil)

	// Revocation closes the session (the browser restarts on next use).
	ws, r = cdpVersion(t, a, id)
	if r.Status != http.StatusOK {
		t.Logf("ps: %+v", a.Exec(id, "ps -eo pid,stat,nlwp,comm"))
		t.Fatalf("version after unhalt: %d %s", r.Status, r.Raw)
	}
	c = dialCDP(t, ctx, ws, ka.Key)
	admin.JSON("DELETE", "/v1/keys/"+ka.ID, nil, http.StatusOK, nil)
	waitClosed(t, ctx, c, "revocation")
	auditHas(t, admin, id, "browser.cdp", nil)
	auditHas(t, admin, id, "cdp.disconnect", nil)
}

// TestVNCRelayCarriesTheDesktop opens the desktop through the relay with a
// one-time ticket and reads a framebuffer update of the virtual display.
func TestVNCRelayCarriesTheDesktop(t *testing.T) {
	requireChromium(t)
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	a := admin.As(admin.NewKey("agent-a", "agent").Key)
	id := a.NewSandbox(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var tk struct {
		Ticket string `json:"ticket"`
	}
	a.JSON("POST", "/v1/tickets", map[string]string{"scope": "vnc"}, http.StatusCreated, &tk)
	u := "ws://" + d.Addr() + "/sandboxes/" + id + "/vnc/websockify?ticket=" + url.QueryEscape(tk.Ticket)
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"binary"}})
	if err != nil {
		var body []byte
		if resp != nil && resp.Body != nil {
			body, _ = io.ReadAll(resp.Body)
		}
		t.Fatalf("dial the desktop: %v %s", err, body)
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(64 << 20)
	rfb := websocket.NetConn(ctx, c, websocket.MessageBinary)
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
	// RFB 3.8: version, security type None, init.
	if v := string(read(12)); !strings.HasPrefix(v, "RFB 003.") {
		t.Fatalf("server version %q", v)
	}
	write([]byte("RFB 003.008\n"))
	types := read(int(read(1)[0]))
	if !strings.ContainsRune(string(types), 1) {
		t.Fatalf("security types %v lack None", types)
	}
	write([]byte{1})
	if res := binary.BigEndian.Uint32(read(4)); res != 0 {
		t.Fatalf("security result %d", res)
	}
	write([]byte{1}) // shared
	init := read(24)
	w, h := binary.BigEndian.Uint16(init[0:2]), binary.BigEndian.Uint16(init[2:4])
	read(int(binary.BigEndian.Uint32(init[20:24]))) // desktop name
	if w != browser.DefaultWidth || h != browser.DefaultHeight {
		t.Fatalf("desktop %dx%d, want %dx%d", w, h, browser.DefaultWidth, browser.DefaultHeight)
	}
	// A full, non-incremental update of the whole screen.
	req := []byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(req[6:8], w)
	binary.BigEndian.PutUint16(req[8:10], h)
	write(req)
	if typ := read(1)[0]; typ != 0 {
		t.Fatalf("first server message type %d, want 0 (framebuffer update)", typ)
	}
	read(1)
	if n := binary.BigEndian.Uint16(read(2)); n == 0 {
		t.Fatal("framebuffer update with no rectangles")
	}
}

// TestPlaywrightOverTheCDPRelay drives the sandbox's browser with
// Playwright's connectOverCDP (test/browser-ts): the relay URL plus the key
// header fills a form and reads the result, then opens a page in a context
// of its own (browser.newContext, which closed a --single-process browser);
// without the key it is refused. The sandbox has the default limits.
func TestPlaywrightOverTheCDPRelay(t *testing.T) {
	requireChromium(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "test", "browser-ts"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		t.Skip("playwright-core is not installed: run `npm ci --prefix test/browser-ts` (make deps does)")
	}
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	k := admin.NewKey("agent-a", "agent")
	id := admin.As(k.Key).NewSandbox(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "cdp-e2e.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SANDHOLD_CDP_URL=http://"+d.Addr()+"/sandboxes/"+id+"/cdp", "SANDHOLD_KEY="+k.Key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("playwright: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"text":"hello sandhold"`) || !strings.Contains(string(out), `"withoutKey":"refused"`) ||
		!strings.Contains(string(out), `"newContext":"second:2:800"`) {
		t.Fatalf("playwright said: %s", out)
	}
}

// cdpCall sends one DevTools command over c and returns its result,
// skipping events.
func cdpCall(t *testing.T, ctx context.Context, c *websocket.Conn, id int, session, method string, params map[string]any) map[string]any {
	t.Helper()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	for {
		_, raw, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var r struct {
			ID     int            `json:"id"`
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal(raw, &r) == nil && r.ID == id {
			return r.Result
		}
	}
}

// TestBrowserInProxyModeGoesThroughTheAllowList: a page in a mode-proxy
// sandbox asks for a host that is not on the sandbox's list; the proxy
// refuses it and the refusal is in the audit log.
func TestBrowserInProxyModeGoesThroughTheAllowList(t *testing.T) {
	requireChromium(t)
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	k := admin.NewKey("agent-a", "agent")
	a := admin.As(k.Key)
	id := a.NewSandbox(map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"allowed.example"}}})
	ws, r := cdpVersion(t, a, id)
	if r.Status != http.StatusOK {
		t.Fatalf("version: %d %s", r.Status, r.Raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := dialCDP(t, ctx, ws, k.Key)
	defer func() { _ = c.CloseNow() }()
	target := cdpCall(t, ctx, c, 2, "", "Target.createTarget", map[string]any{"url": "about:blank"})
	sess := cdpCall(t, ctx, c, 3, "", "Target.attachToTarget", map[string]any{"targetId": target["targetId"], "flatten": true})
	// The proxy answers the refusal itself (an error page, or a failed
	// navigation for HTTPS); what matters is that it was asked and said no.
	_ = cdpCall(t, ctx, c, 4, sess["sessionId"].(string), "Page.navigate", map[string]any{"url": "http://unlisted.example/"})
	auditHasVerdict(t, admin, id, "network.connect", "deny", "unlisted.example")
}

// auditHasVerdict fails unless an action on sandbox id with verdict names
// host in its record.
func auditHasVerdict(t *testing.T, admin *daemontest.Client, id, action, verdict, host string) {
	t.Helper()
	var raw json.RawMessage
	for range 100 {
		r := daemontest.WithT(admin, t).Do("GET", "/v1/audit?action="+action+"&sandbox="+id, nil)
		raw = r.Raw
		if strings.Contains(string(r.Raw), host) && strings.Contains(string(r.Raw), `"verdict":"`+verdict) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s %s record naming %s: %.2000s", verdict, action, host, raw)
}
