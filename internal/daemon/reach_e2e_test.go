package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// wsEchoServer is a minimal WebSocket echo server (one text frame per
// message, no fragmentation), so the test needs nothing beyond python3.
const wsEchoServer = `import base64,hashlib,socket,sys,threading
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
def serve(c):
    f=c.makefile("rb")
    key=""
    while True:
        l=f.readline().decode()
        if l in ("\r\n",""): break
        if l.lower().startswith("sec-websocket-key:"): key=l.split(":",1)[1].strip()
    acc=base64.b64encode(hashlib.sha1((key+"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+acc+"\r\n\r\n").encode())
    while True:
        h=f.read(2)
        if len(h)<2: return
        n=h[1]&127
        if n==126: n=int.from_bytes(f.read(2),"big")
        mask=f.read(4); data=bytes(b^mask[i%4] for i,b in enumerate(f.read(n)))
        if h[0]&15==8: return
        out=b"echo:"+data
        c.sendall(bytes([0x81, len(out)])+out)
while True:
    c,_=s.accept(); threading.Thread(target=serve,args=(c,),daemon=True).start()
`

// fileServer serves the directory site on the port in argv[1] and answers
// a POST with the body it read, prefixed "form:". It reads every body: a
// server that answers before reading a body it was sent (http.server's
// 501 to a POST) and closes makes the kernel reset the connection, which
// could cut the relayed answer short and made the form case flaky.
const fileServer = `import functools,http.server,sys
class H(http.server.SimpleHTTPRequestHandler):
    def do_POST(self):
        b=b"form:"+self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Type","text/plain"); self.send_header("Content-Length",str(len(b))); self.end_headers(); self.wfile.write(b)
http.server.ThreadingHTTPServer(("127.0.0.1",int(sys.argv[1])),functools.partial(H,directory="site")).serve_forever()
`

func TestPreviewProxyReachesTheSandboxsServer(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the test servers need /usr/bin/python3")
	}
	d := daemontest.Start(t, func(c *config.Config) { c.PreviewPorts = []uint16{8000, 8001} })
	admin := daemontest.NewClient(t, d)
	a := admin.As(admin.NewKey("agent-a", "agent").Key)
	b := admin.As(admin.NewKey("agent-b", "agent").Key)
	id := a.NewSandbox(nil)
	if r := a.Exec(id, "mkdir -p site && echo hello-preview > site/index.html"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("prepare: %+v", r)
	}
	for _, cmd := range []string{
		"exec python3 -c '" + strings.ReplaceAll(fileServer, "'", `'"'"'`) + "' 8000",
		"exec python3 -c '" + strings.ReplaceAll(wsEchoServer, "'", `'"'"'`) + "' 8001",
	} {
		a.JSON("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"command": cmd, "background": true, "timeout": 600}, http.StatusOK, nil)
	}
	page := "/sandboxes/" + id + "/proxy/8000/index.html"
	var r daemontest.Reply
	for range 200 {
		if r = a.Do("GET", page, nil); r.Status == http.StatusOK {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.Status != http.StatusOK || strings.TrimSpace(string(r.Raw)) != "hello-preview" {
		t.Fatalf("preview: %d %s", r.Status, r.Raw)
	}
	// The page runs in an opaque origin, never as this server's.
	if csp := r.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox ") || strings.Contains(csp, "allow-same-origin") {
		t.Fatalf("preview CSP %q", csp)
	}
	// The same at /absproxy/ (the full path reaches the server, which
	// has no such file) and at /proxy/ of the caller's default sandbox
	// (another sandbox, where nothing listens).
	if r := a.Do("GET", "/sandboxes/"+id+"/absproxy/8000/index.html", nil); r.Status != http.StatusNotFound || r.Envelope {
		t.Fatalf("absproxy: the server's own 404 expected, got %d %s", r.Status, r.Raw)
	}

	cases := []struct {
		name   string
		c      *daemontest.Client
		method string
		path   string
		body   any
		hdr    []string
		want   int
		// wantBody, when set, is the whole answer's body.
		wantBody string
	}{
		{"no key", a.As(""), "GET", page, nil, nil, http.StatusUnauthorized, ""},
		{"another key's sandbox", b, "GET", page, nil, nil, http.StatusNotFound, ""},
		{"port not in the list", a, "GET", "/sandboxes/" + id + "/proxy/8002/", nil, nil, http.StatusForbidden, ""},
		{"browser port", a, "GET", "/sandboxes/" + id + "/proxy/9222/json/version", nil, nil, http.StatusForbidden, ""},
		{"port zero", a, "GET", "/sandboxes/" + id + "/proxy/0/", nil, nil, http.StatusBadRequest, ""},
		// A form body is relayed as sent, not refused as a non-JSON body.
		{"form body relayed", a, "POST", page, strings.NewReader("a=1"), []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusOK, "form:a=1"},
		{"no trailing slash", a, "GET", "/sandboxes/" + id + "/proxy/8000", nil, nil, http.StatusPermanentRedirect, ""},
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := *tc.c
			c.HTTP = noRedirect
			r := daemontest.WithT(&c, t).Do(tc.method, tc.path, tc.body, tc.hdr...)
			if r.Status != tc.want {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.want, r.Raw)
			}
			if tc.wantBody != "" && string(r.Raw) != tc.wantBody {
				t.Fatalf("body %q, want %q", r.Raw, tc.wantBody)
			}
		})
	}

	// A one-time ticket instead of the key, once.
	var tk struct {
		Ticket string `json:"ticket"`
	}
	a.JSON("POST", "/v1/tickets", map[string]string{"scope": "preview"}, http.StatusCreated, &tk)
	anon := a.As("")
	if r := anon.Do("GET", page+"?ticket="+url.QueryEscape(tk.Ticket), nil); r.Status != http.StatusOK {
		t.Fatalf("with a ticket: %d %s", r.Status, r.Raw)
	}
	if r := anon.Do("GET", page+"?ticket="+url.QueryEscape(tk.Ticket), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("a used ticket: %d", r.Status)
	}

	// A WebSocket through the proxy, with the key header.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wsURL := "ws://" + d.Addr() + "/sandboxes/" + id + "/proxy/8001/ws"
	c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + a.Key}}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("websocket through the proxy: %v", err)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "echo:ping" {
		t.Fatalf("echo %q, %v", msg, err)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")

	// Every request is audited.
	auditHas(t, admin, id, "preview.connect", func(d map[string]any) bool { return d["websocket"] == true })
	auditHas(t, admin, id, "preview.disconnect", nil)
}

// auditHas fails unless the audit log holds an allowed action on sandbox
// id whose detail passes match (nil: any).
func auditHas(t *testing.T, admin *daemontest.Client, id, action string, match func(map[string]any) bool) {
	t.Helper()
	var page struct {
		Records []struct {
			Verdict string         `json:"verdict"`
			Detail  map[string]any `json:"detail"`
		} `json:"records"`
	}
	for range 100 {
		daemontest.WithT(admin, t).JSON("GET", "/v1/audit?action="+action+"&sandbox="+id, nil, http.StatusOK, &page)
		for _, r := range page.Records {
			if (r.Verdict == "allowed" || r.Verdict == "allow") && (match == nil || match(r.Detail)) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	raw, _ := json.Marshal(page)
	t.Fatalf("no %s record for %s: %.2000s", action, id, raw)
}
