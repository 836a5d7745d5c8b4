package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// attackPage is what the attacker's sandbox serves: a script that tries to
// act as the signed-in operator, on the page's own origin and on the
// console's (MAIN), and reports in the title.
const attackPage = `<!doctype html><title>loading</title><script data-attack>
(async () => {
  const out = [];
  for (const base of ['', 'MAIN']) {
    try {
      const s = await fetch(base + '/console/session', { credentials: 'include' });
      const j = await s.json();
      const r = await fetch(base + '/v1/keys', { method: 'POST', credentials: 'include',
        headers: { 'X-CSRF-Token': j.data.csrf_token, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: 'pwned', role: 'admin' }) });
      out.push((base || 'self') + ':' + r.status);
    } catch (e) {
      out.push((base || 'self') + ':' + e);
    }
  }
  document.title = 'attack:' + out.join(' ');
})();
</script>`

// fakeServer is the squatter: on the sandbox's own loopback, a valid
// DevTools /json/version (so the relay takes it for the browser) and the
// attack page for every other path.
const fakeServer = `import http.server,json,sys
PAGE=open("attack.html","rb").read()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.split("?")[0]=="/json/version":
            b=json.dumps({"Browser":"Chrome/999.0","Protocol-Version":"1.3","webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/browser/fake"}).encode();ct="application/json"
        else:
            b=PAGE;ct="text/html"
        self.send_response(200);self.send_header("Content-Type",ct);self.send_header("Content-Length",str(len(b)));self.end_headers();self.wfile.write(b)
    def log_message(self,*a):pass
http.server.ThreadingHTTPServer(("127.0.0.1",int(sys.argv[1])),H).serve_forever()
`

// TestSignedInOperatorOpeningSandboxContentCreatesNoKey is issue 29's row
// 1 in a real browser (Debian's Chromium through playwright-core from
// test/browser-ts): code in an agent's sandbox squats on 127.0.0.1:9222
// and a preview port, serving HTML whose script reads the console's CSRF
// token and creates an admin key. An operator signed in to the console
// opens the attacker's links — the DevTools relay's /json/…, the
// front-end's path, a preview with the agent's own preview ticket, the
// content hosts and listener — with and without a content origin
// configured. No key is created, and the console's session survives.
func TestSignedInOperatorOpeningSandboxContentCreatesNoKey(t *testing.T) {
	node, chrome, tmp := requirePlaywright(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the attacker's servers need /usr/bin/python3")
	}
	for _, tc := range []struct {
		name    string
		content bool
	}{
		{"content origin configured", true},
		{"no content origin", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := daemontest.Start(t, func(c *config.Config) {
				c.PreviewPorts = []uint16{3000}
				if tc.content {
					c.ContentDomain = "sandbox.localhost" // Chromium resolves *.localhost to loopback
					c.ContentListen = "127.0.0.1:0"
				}
			})
			main := "http://" + d.Addr()
			admin := daemontest.NewClient(t, d)
			agent := admin.As(admin.NewKey("agent", "agent").Key)
			id := agent.NewSandbox(nil)
			page := strings.ReplaceAll(attackPage, "MAIN", main)
			if r := agent.Exec(id, "cat > attack.html <<'EOF'\n"+page+"\nEOF"); r.ExitCode == nil || *r.ExitCode != 0 {
				t.Fatalf("write the page: %+v", r)
			}
			for _, port := range []string{"9222", "3000"} {
				agent.JSON("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"command": "exec python3 -c '" + fakeServer + "' " + port,
					"background": true, "timeout": 600}, http.StatusOK, nil)
			}
			var r daemontest.Reply
			for range 400 {
				if r = agent.Do("GET", "/sandboxes/"+id+"/proxy/3000/", nil); r.Status == http.StatusOK {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), "data-attack") {
				t.Fatalf("the attacker's preview: %d %.200s", r.Status, r.Raw)
			}
			// A ticket lives TicketTTL (30 s) and the browser opens the
			// links one after the other (minutes under load): the script
			// mints each with the agent's key just before its link, as an
			// attacker would send a fresh one.
			mint := func(scope string) string { return "TICKET(" + scope + ")" }
			sb := "/sandboxes/" + id
			links := []string{
				main + sb + "/cdp/json/anything", // the link
				main + sb + "/cdp/json/anything?ticket=" + mint("cdp"),
				main + sb + "/cdp/devtools/inspector.html",
				main + sb + "/proxy/3000/?ticket=" + mint("preview"),
				main + sb + "/proxy/3000/",
			}
			if tc.content {
				port := d.Addr()[strings.LastIndex(d.Addr(), ":")+1:]
				links = append(links,
					"http://9222-"+id+".sandbox.localhost:"+port+"/json/anything?ticket="+mint("cdp"),
					"http://3000-"+id+".sandbox.localhost:"+port+"/?ticket="+mint("preview"),
					"http://"+d.ContentAddr()+sb+"/proxy/3000/?ticket="+mint("preview"),
					"http://"+d.ContentAddr()+sb+"/cdp/json/anything?ticket="+mint("cdp"),
				)
			}
			desktop := ""
			if tc.content {
				// The console's Desktop link, for a sandbox of the
				// operator's own: it must show the desktop from the
				// content origin.
				desktop = main + "/sandboxes/" + admin.NewSandbox(nil) + "/vnc/index.html"
			}
			lj, _ := json.Marshal(links)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "origin-e2e.mjs")
			cmd.Dir = browserTS(t)
			cmd.Env = browserEnv(tmp, "SANDHOLD_BASE="+main, "SANDHOLD_ADMIN_KEY="+d.AdminKey(), "SANDHOLD_AGENT_KEY="+agent.Key, "SANDHOLD_LINKS="+string(lj), "CHROMIUM="+chrome,
				"SANDHOLD_DESKTOP="+desktop)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node origin-e2e.mjs: %v\n%s\n%s", err, out, stderr.String())
			}
			var res struct {
				Before, After []string
				Still         int
				Results       []struct {
					Link, URL, Title, Body string
					Status                 any
				}
				Desktop *struct{ URL, Status string }
			}
			if err := json.Unmarshal(out[strings.LastIndex(strings.TrimSpace(string(out)), "\n")+1:], &res); err != nil {
				t.Fatalf("node said %s: %v", out, err)
			}
			ran := 0
			for _, l := range res.Results {
				t.Logf("%s → %v %s %q %.80q", l.Link, l.Status, l.URL, l.Title, l.Body)
				if strings.HasPrefix(l.Title, "attack:") {
					ran++
					if strings.Contains(l.Title, ":201") || strings.Contains(l.Title, ":200") {
						t.Errorf("the attacker's script reached the API: %s", l.Title)
					}
				}
			}
			if len(res.After) != len(res.Before) || strings.Contains(strings.Join(res.After, ","), "pwned") {
				t.Fatalf("keys before %v, after %v: the attacker's page created one", res.Before, res.After)
			}
			if tc.content {
				t.Logf("the console's desktop: %+v", res.Desktop)
				if res.Desktop == nil || res.Desktop.Status != "Connected" || !strings.HasPrefix(res.Desktop.URL, "http://5900-") ||
					strings.Contains(res.Desktop.URL, "ticket=") {
					t.Errorf("the console's desktop: %+v (want it connected on the content host 5900-{id}, the ticket out of the address)", res.Desktop)
				}
			}
			if res.Still != http.StatusOK {
				t.Fatalf("the console's session after the links: %d", res.Still)
			}
			// The attack pages did load somewhere (a preview with a
			// ticket): the test proves they ran and failed, not only that
			// they were refused.
			if ran == 0 {
				t.Fatal("no attack page ran at all: the test proves nothing")
			}
		})
	}
}

// requirePlaywright finds node, Chromium (probed in a child) and
// test/browser-ts's playwright-core, or skips with the reason.
func requirePlaywright(t *testing.T) (node, chrome, tmp string) {
	t.Helper()
	node, chrome, _, tmp = requireBrowserRun(t)
	if _, err := os.Stat(filepath.Join(browserTS(t), "node_modules", "playwright-core", "package.json")); err != nil {
		t.Skip("playwright-core is not installed: run `npm ci --prefix test/browser-ts` (make deps does)")
	}
	return node, chrome, tmp
}

func browserTS(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "test", "browser-ts"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
