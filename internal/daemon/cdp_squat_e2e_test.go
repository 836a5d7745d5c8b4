package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// impostor is what code in a sandbox would run in place of its browser: a
// DevTools endpoint on 127.0.0.1:9222 that answers /json/version as a
// browser would (and HTML elsewhere), noting every request in a file.
const impostor = `import http.server,json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open("impostor-hit","a").write(self.path+"\n")
        if self.path.startswith("/json/version"):
            b=json.dumps({"Browser":"Chrome/999.0 impostor","webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/browser/impostor"}).encode();ct="application/json"
        else:
            b=b"<script>alert(1)</script>";ct="text/html"
        self.send_response(200);self.send_header("Content-Type",ct);self.send_header("Content-Length",str(len(b)));self.end_headers();self.wfile.write(b)
    def log_message(self,*a):pass
http.server.ThreadingHTTPServer(("127.0.0.1",9222),H).serve_forever()
`

// TestCDPRelayDoesNotTalkToAnImpostor is issue 29's squatting case: code
// in the sandbox kills its Chromium (same uid) and binds 127.0.0.1:9222
// itself. The browser speaks DevTools over the pipe it was started with,
// so the open DevTools sessions end with it, the next request starts a
// real browser again, and the impostor is never asked anything.
func TestCDPRelayDoesNotTalkToAnImpostor(t *testing.T) {
	requireChromium(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the impostor needs /usr/bin/python3")
	}
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	k := admin.NewKey("agent-a", "agent")
	a := admin.As(k.Key)
	id := a.NewSandbox(nil)
	version := func() (string, string) {
		t.Helper()
		r := a.Do("GET", "/sandboxes/"+id+"/cdp/json/version", nil)
		var v struct {
			Browser string `json:"Browser"`
			WS      string `json:"webSocketDebuggerUrl"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &v) != nil {
			t.Fatalf("version: %d %s", r.Status, r.Raw)
		}
		return v.Browser, v.WS
	}
	real, ws := version()
	if !strings.HasPrefix(real, "Chrome/") && !strings.HasPrefix(real, "HeadlessChrome/") {
		t.Fatalf("the browser says %q", real)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := dialCDP(t, ctx, ws, k.Key)

	// The browser is killed from inside and its port taken.
	if r := a.Exec(id, "pkill -KILL -f /usr/lib/chromium/chromium; true"); r.ExitCode == nil {
		t.Fatalf("kill the browser: %+v", r)
	}
	waitClosed(t, ctx, c, "the browser's end")
	a.JSON("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"command": "exec python3 -c '" + impostor + "'", "background": true, "timeout": 600}, http.StatusOK, nil)
	for i := 0; ; i++ {
		r := a.Exec(id, `python3 -c 'import socket; socket.create_connection(("127.0.0.1",9222),1)' 2>/dev/null && echo up`)
		if strings.Contains(r.Stdout, "up") {
			break
		}
		if i == 200 {
			t.Fatal("the impostor never listened")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := a.Exec(id, "rm -f impostor-hit"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("clear the impostor's log (its own check above): %+v", r)
	}

	// The relay starts a browser of its own again and speaks to it alone.
	again, ws2 := version()
	if again != real {
		t.Fatalf("after the squat the relay says %q (was %q)", again, real)
	}
	if r := a.Do("GET", "/sandboxes/"+id+"/cdp/json/list", nil); r.Status != http.StatusOK || strings.Contains(string(r.Raw), "<script") {
		t.Fatalf("list after the squat: %d %s", r.Status, r.Raw)
	}
	c2 := dialCDP(t, ctx, ws2, k.Key) // Browser.getVersion answered by a real Chrome
	_ = c2.CloseNow()
	if r := a.Exec(id, "cat impostor-hit 2>/dev/null; true"); strings.TrimSpace(r.Stdout) != "" {
		t.Fatalf("the relay asked the impostor: %q", r.Stdout)
	}
}
