package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// conformPage is the page the sweep drives, served by a web server inside
// the sandbox: a form for fill/click/check/select/upload, text to find, a
// console line, and a file to download.
const conformPage = `<!doctype html><html><head><title>Conf</title></head><body>
<h1>Conformance</h1><p>Find me here.</p>
<form action="done.html"><input id="q" name="q"><select id="s"><option value="a">A</option><option value="b">B</option></select>
<input id="c" type="checkbox"><input id="f" type="file"><button id="go">Go</button></form>
<p id="out"></p><a id="dl" href="file.bin" download>download</a>
<script>document.getElementById("q").addEventListener("input", e => { document.getElementById("out").textContent = "typed:" + e.target.value })
console.log("conf-log")</script></body></html>`

// conformStep is one call of the sweep. path is AIO's path template.
type conformStep struct {
	method, path, target, body string
	image                      bool // the answer is a PNG
	text                       bool // the answer is text (proxy.pac)
	fail                       bool // a tool-level failure: 200, success false
	// file names the field of the answer's data holding a file the step
	// made in the sandbox, which must exist and be non-empty; size, when
	// set, names the field that must hold the file's size in bytes.
	file, size string
	// check looks at the envelope's data of a successful answer.
	check func(t *testing.T, data json.RawMessage)
	// alongside is a page/click body sent once the step's call is under
	// way (a wait that needs something to happen meanwhile).
	alongside string
}

// TestAIOBrowserRoutesConformInSandbox calls each of AIO's 52 browser
// operations through a real server whose Chromium runs inside the sandbox,
// at both prefixes (/v1/browser/... on the caller's default sandbox,
// /sandboxes/{id}/v1/browser/... on a named one), on a page served by a
// web server inside that sandbox, and checks every JSON answer against
// AIO's OpenAPI schema and every image by decoding it. It is the
// in-sandbox twin of internal/api's TestAIOBrowserRoutesConform (which
// drives a Chromium on the host); a browser route of AIO's document that
// no step calls fails the test.
func TestAIOBrowserRoutesConformInSandbox(t *testing.T) {
	requireChromium(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the in-sandbox web server needs /usr/bin/python3")
	}
	v := aiotest.Load(t)
	d := daemontest.Start(t, func(c *config.Config) { c.PreviewPorts = []uint16{8000} })
	admin := daemontest.NewClient(t, d)
	a := admin.As(admin.NewKey("agent-a", "agent").Key)
	other := admin.As(admin.NewKey("agent-b", "agent").Key)

	// The default sandbox comes into being with the first /v1 call.
	a.JSON("POST", "/v1/file/write", map[string]any{"file": "/workspace/probe.txt", "content": "x"}, http.StatusOK, nil)
	var list []struct {
		ID string `json:"id"`
	}
	a.JSON("GET", "/v1/sandboxes", nil, http.StatusOK, &list)
	if len(list) != 1 {
		t.Fatalf("want the one default sandbox, got %+v", list)
	}
	named := a.NewSandbox(nil)
	for _, run := range []struct{ name, id, prefix string }{
		{"default sandbox at /v1", list[0].ID, ""},
		{"named sandbox at /sandboxes/{id}/v1", named, "/sandboxes/" + named},
	} {
		t.Run(run.name, func(t *testing.T) {
			origin := serveConformPage(t, a, run.id)
			steps := conformSteps(origin)
			covered := map[string]bool{}
			for _, sp := range steps {
				covered[sp.method+" "+sp.path] = true
				target := sp.target
				if target == "" {
					target = sp.path
				}
				t.Run(sp.method+" "+target, func(t *testing.T) {
					runConformStep(t, v, daemontest.WithT(a, t), run.id, run.prefix, target, sp)
				})
			}
			for _, op := range aioBrowserOperations(t, v) {
				if !covered[op] {
					t.Errorf("AIO's %s is not called by the sweep", op)
				}
			}
			// Another key reaches neither the sandbox nor its browser.
			if run.prefix != "" {
				r := daemontest.WithT(other, t).Do("GET", run.prefix+"/v1/browser/page/text", nil)
				if r.Success || !strings.Contains(string(r.Data), `"code":"not_found"`) {
					t.Errorf("another key's call: %d %s, want not_found", r.Status, r.Raw)
				}
			}
		})
	}
}

// runConformStep sends one step at prefix (sandbox id's) and checks its
// answer.
func runConformStep(t *testing.T, v *aiotest.Validator, c *daemontest.Client, id, prefix, target string, sp conformStep) {
	t.Helper()
	var body any
	if sp.body != "" {
		body = json.RawMessage(sp.body)
	}
	if sp.alongside != "" {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			time.Sleep(time.Second) // the wait is under way by then
			req, err := http.NewRequest("POST", c.Base+prefix+"/v1/browser/page/click", strings.NewReader(sp.alongside))
			if err != nil {
				return
			}
			req.Header.Set("Authorization", "Bearer "+c.Key)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	r := c.Do(sp.method, prefix+target, body)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Raw)
	}
	switch {
	case sp.image:
		img, err := png.Decode(bytes.NewReader(r.Raw))
		if err != nil {
			t.Fatalf("not a PNG (%s): %v", r.Header.Get("Content-Type"), err)
		}
		if sp.path == "/v1/browser/screenshot" && (img.Bounds().Dx() != 800 || img.Bounds().Dy() != 600) {
			t.Fatalf("display screenshot %v, want the configured 800x600", img.Bounds())
		}
		return
	case sp.text:
		if !strings.Contains(string(r.Raw), "FindProxyForURL") || r.Header.Get("Content-Type") != "application/x-ns-proxy-autoconfig" {
			t.Fatalf("PAC: %s %s", r.Header.Get("Content-Type"), r.Raw)
		}
		return
	}
	if !r.Envelope {
		t.Fatalf("not AIO's envelope: %s", r.Raw)
	}
	v.Check(t, sp.method, sp.path, r.Status, r.Raw)
	switch {
	case r.Success == sp.fail:
		t.Fatalf("success %v: %s", r.Success, r.Raw)
	case sp.check != nil:
		sp.check(t, r.Data)
	}
	if sp.file != "" {
		checkMadeFile(t, c, id, sp, r.Data)
	}
}

// checkMadeFile checks that the file a step's answer names exists in
// sandbox id, is not empty and has the size the answer says.
func checkMadeFile(t *testing.T, c *daemontest.Client, id string, sp conformStep, data json.RawMessage) {
	t.Helper()
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatalf("data is not an object: %s", data)
	}
	p, _ := fields[sp.file].(string)
	if !strings.HasPrefix(p, "/") {
		t.Fatalf("data's %s is not a sandbox path: %s", sp.file, data)
	}
	out := c.Exec(id, "stat -c %s "+p)
	var got int64
	if _, err := fmt.Sscan(out.Stdout, &got); err != nil || got <= 0 {
		t.Fatalf("%s in the sandbox: %+v", p, out)
	}
	if sp.size != "" {
		if want, _ := fields[sp.size].(float64); int64(want) != got {
			t.Fatalf("data's %s is %v, the file has %d bytes: %s", sp.size, fields[sp.size], got, data)
		}
	}
}

// serveConformPage writes the page into sandbox id's workspace, starts a
// web server for it inside the sandbox and returns its origin as the
// sandbox's browser sees it.
func serveConformPage(t *testing.T, a *daemontest.Client, id string) string {
	t.Helper()
	a = daemontest.WithT(a, t)
	pre := "/sandboxes/" + id
	for name, content := range map[string]string{
		"site/page.html": conformPage,
		"site/done.html": "<!doctype html><title>Done</title><p>submitted</p>",
		"site/file.bin":  "downloaded bytes",
		"up.txt":         "an upload from the workspace",
	} {
		a.JSON("POST", pre+"/v1/file/write", map[string]any{"file": "/workspace/" + name, "content": content}, http.StatusOK, nil)
	}
	a.JSON("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{
		"command":    "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory site",
		"background": true, "timeout": 600,
	}, http.StatusOK, nil)
	var r daemontest.Reply
	for range 300 {
		if r = a.Do("GET", pre+"/proxy/8000/page.html", nil); r.Status == http.StatusOK {
			return "http://127.0.0.1:8000"
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the in-sandbox web server did not answer: %d %s", r.Status, r.Raw)
	return ""
}

// aioBrowserOperations lists "METHOD /v1/browser/..." for every browser
// operation of AIO's document.
func aioBrowserOperations(t *testing.T, v *aiotest.Validator) []string {
	t.Helper()
	var ops []string
	for _, p := range aioBrowserPaths {
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			if _, err := v.Operation(m, p); err == nil {
				ops = append(ops, m+" "+p)
			}
		}
	}
	if len(ops) != 52 {
		t.Errorf("%d browser operations found in AIO's document, 1.9.4 has 52", len(ops))
	}
	return ops
}

// aioBrowserPaths are the browser paths of AIO 1.9.4 (the operations on
// each are looked up in the document).
var aioBrowserPaths = []string{
	"/v1/browser/info", "/v1/browser/screenshot", "/v1/browser/actions", "/v1/browser/config",
	"/v1/browser/page/navigate", "/v1/browser/page/back", "/v1/browser/page/forward", "/v1/browser/page/reload",
	"/v1/browser/page/click", "/v1/browser/page/fill", "/v1/browser/page/type", "/v1/browser/page/press_key",
	"/v1/browser/page/hot_key", "/v1/browser/page/hover", "/v1/browser/page/select_option",
	"/v1/browser/page/check", "/v1/browser/page/uncheck", "/v1/browser/page/upload_file",
	"/v1/browser/page/fill_form", "/v1/browser/page/scroll", "/v1/browser/page/scroll_to",
	"/v1/browser/page/scroll_to_element", "/v1/browser/page/screenshot", "/v1/browser/page/record",
	"/v1/browser/page/html", "/v1/browser/page/text", "/v1/browser/page/markdown", "/v1/browser/page/elements",
	"/v1/browser/page/console", "/v1/browser/page/console/export", "/v1/browser/page/evaluate",
	"/v1/browser/page/find_text", "/v1/browser/page/wait", "/v1/browser/tabs", "/v1/browser/tabs/{index}/activate",
	"/v1/browser/tabs/{index}", "/v1/browser/cookies", "/v1/browser/state/save", "/v1/browser/state/load",
	"/v1/browser/network/headers", "/v1/browser/network/scoped_headers", "/v1/browser/network/route",
	"/v1/browser/network/requests", "/v1/browser/network/export_har", "/v1/browser/captcha/detect",
	"/v1/browser/captcha/wait", "/v1/browser/proxy.pac", "/v1/browser/restart",
}

// dataHas fails unless the answer's data, as JSON text, contains want.
func dataHas(want string) func(t *testing.T, data json.RawMessage) {
	return func(t *testing.T, data json.RawMessage) {
		t.Helper()
		if !strings.Contains(string(data), want) {
			t.Fatalf("data lacks %q: %.1500s", want, data)
		}
	}
}

// conformSteps is the sweep over the page at origin. A target's
// "#fragment" only names a repeated step (it is not sent).
func conformSteps(origin string) []conformStep {
	page := origin + "/page.html"
	return []conformStep{
		{method: "GET", path: "/v1/browser/info", check: dataHas(`"cdp_url":"http://`)},
		{method: "POST", path: "/v1/browser/config", body: `{"resolution":{"width":800,"height":600}}`},
		{method: "POST", path: "/v1/browser/page/navigate", body: fmt.Sprintf(`{"url":%q}`, page), check: dataHas(`Conf`)},
		{method: "GET", path: "/v1/browser/screenshot", image: true},
		{method: "GET", path: "/v1/browser/page/screenshot", target: "/v1/browser/page/screenshot?full_page=true", image: true},
		{method: "POST", path: "/v1/browser/page/click", body: `{"selector":"#q"}`},
		{method: "POST", path: "/v1/browser/page/fill", body: `{"selector":"#q","text":"hello"}`},
		{method: "POST", path: "/v1/browser/page/type", body: `{"text":"!"}`},
		// The page saw the typing: its input handler wrote the field's value.
		{method: "GET", path: "/v1/browser/page/text", check: dataHas("typed:hello!")},
		{method: "POST", path: "/v1/browser/page/press_key", body: `{"key":"End"}`},
		{method: "POST", path: "/v1/browser/page/hot_key", body: `{"keys":["Shift","Home"]}`},
		{method: "POST", path: "/v1/browser/page/hover", body: `{"selector":"h1"}`},
		{method: "POST", path: "/v1/browser/page/select_option", body: `{"selector":"#s","value":"b"}`},
		{method: "POST", path: "/v1/browser/page/check", body: `{"selector":"#c"}`},
		{method: "POST", path: "/v1/browser/page/evaluate", body: `{"expression":"document.getElementById('s').value + document.getElementById('c').checked"}`, check: dataHas("btrue")},
		{method: "POST", path: "/v1/browser/page/uncheck", body: `{"selector":"#c"}`},
		// A workspace file onto the file input, read back by the page.
		{method: "POST", path: "/v1/browser/page/upload_file", body: `{"selector":"#f","files":["up.txt"]}`},
		{method: "POST", path: "/v1/browser/page/evaluate", body: `{"expression":"document.getElementById('f').files[0].name + ':' + document.getElementById('f').files[0].size"}`, check: dataHas("up.txt:28")},
		{method: "POST", path: "/v1/browser/page/fill_form", body: `{"items":[{"selector":"#q","value":"form"}]}`},
		{method: "POST", path: "/v1/browser/page/scroll", body: `{"direction":"down","amount":10}`},
		{method: "POST", path: "/v1/browser/page/scroll_to", body: `{"x":0,"y":0}`},
		{method: "POST", path: "/v1/browser/page/scroll_to_element", body: `{"selector":"#go"}`},
		{method: "POST", path: "/v1/browser/actions", body: `{"action_type":"MOVE_TO","x":10,"y":10}`},
		// A short recording of the page, answered with its file.
		{method: "POST", path: "/v1/browser/page/record", body: `{"action":"once","duration":2,"save_path":"/workspace/rec.mp4"}`,
			check: dataHas(`"status":"stopped"`), file: "save_path", size: "file_size_bytes"},
		{method: "POST", path: "/v1/browser/page/record", target: "/v1/browser/page/record#status", body: `{"action":"status"}`,
			check: dataHas(`"status":"stopped"`)},
		{method: "GET", path: "/v1/browser/page/html", target: "/v1/browser/page/html?outer=true", check: dataHas("Conformance")},
		{method: "GET", path: "/v1/browser/page/markdown", check: dataHas("Conformance")},
		{method: "GET", path: "/v1/browser/page/elements", check: dataHas("go")},
		{method: "GET", path: "/v1/browser/page/console", check: dataHas("conf-log")},
		{method: "POST", path: "/v1/browser/page/console/export", body: `{"save_path":"console.json"}`, file: "path"},
		{method: "POST", path: "/v1/browser/page/find_text", body: `{"keyword":"find me"}`},
		{method: "POST", path: "/v1/browser/page/wait", body: `{"type":"selector","selector":"h1"}`},
		// A click on the page's download link a second into the wait
		// gives the wait its download (file.bin, 16 bytes).
		{method: "POST", path: "/v1/browser/page/wait", target: "/v1/browser/page/wait#download", body: `{"type":"download","timeout":15}`,
			alongside: `{"selector":"#dl"}`, check: dataHas(`"size":16`), file: "path", size: "size"},
		{method: "GET", path: "/v1/browser/tabs"},
		{method: "POST", path: "/v1/browser/tabs", body: `{"url":"about:blank"}`},
		{method: "PUT", path: "/v1/browser/tabs/{index}/activate", target: "/v1/browser/tabs/0/activate"},
		{method: "DELETE", path: "/v1/browser/tabs/{index}", target: "/v1/browser/tabs/1"},
		{method: "POST", path: "/v1/browser/page/click", body: `{"selector":"#go"}`},
		{method: "POST", path: "/v1/browser/page/wait", body: `{"type":"url","url":"*done.html*"}`},
		{method: "GET", path: "/v1/browser/page/text", check: dataHas("submitted")},
		{method: "POST", path: "/v1/browser/page/back", check: dataHas("page.html")},
		{method: "POST", path: "/v1/browser/page/forward", check: dataHas("done.html")},
		{method: "POST", path: "/v1/browser/page/reload"},
		{method: "POST", path: "/v1/browser/cookies", body: fmt.Sprintf(`{"cookies":[{"name":"a","value":"1","url":%q}]}`, origin)},
		{method: "GET", path: "/v1/browser/cookies", target: "/v1/browser/cookies?urls=" + url.QueryEscape(origin), check: dataHas(`"a"`)},
		{method: "POST", path: "/v1/browser/state/save", body: `{"path":"state.json"}`},
		{method: "DELETE", path: "/v1/browser/cookies"},
		{method: "POST", path: "/v1/browser/state/load", body: `{"path":"state.json"}`},
		{method: "GET", path: "/v1/browser/cookies", target: "/v1/browser/cookies?urls=" + url.QueryEscape(origin) + "#after-load", check: dataHas(`"a"`)},
		{method: "POST", path: "/v1/browser/network/headers", body: `{"headers":{"X-A":"1"}}`},
		{method: "POST", path: "/v1/browser/network/scoped_headers", body: fmt.Sprintf(`{"origin":%q,"headers":{"X-B":"2"}}`, origin)},
		{method: "POST", path: "/v1/browser/network/route", body: `{"url_pattern":"*/nothing","abort":true}`},
		{method: "DELETE", path: "/v1/browser/network/route", body: `{"url_pattern":"*/nothing"}`},
		{method: "POST", path: "/v1/browser/page/navigate", body: fmt.Sprintf(`{"url":%q}`, page+"?second")},
		{method: "GET", path: "/v1/browser/network/requests", target: "/v1/browser/network/requests?filter=page&limit=5", check: dataHas("page.html")},
		{method: "POST", path: "/v1/browser/network/export_har", body: `{"save_path":"net.har"}`},
		{method: "GET", path: "/v1/browser/captcha/detect"},
		{method: "POST", path: "/v1/browser/captcha/wait", body: `{"timeout":2,"poll_interval":0.5}`},
		{method: "GET", path: "/v1/browser/proxy.pac", text: true},
		{method: "POST", path: "/v1/browser/restart", body: `{"mode":"soft"}`},
		{method: "GET", path: "/v1/browser/page/text", target: "/v1/browser/page/text#after-restart"},
		// A missing element is a tool-level failure (200, success false).
		{method: "POST", path: "/v1/browser/page/click", body: `{"selector":"#nope"}`, fail: true},
	}
}

// TestConsoleExportTakesARelativePath: page/console/export documents
// save_path as "a workspace path (relative ones are under /workspace)",
// like network/export_har, which does take one; console export passes
// the path on unresolved and the file tool refuses it (422, "path must be
// absolute").
func TestConsoleExportTakesARelativePath(t *testing.T) {
	requireChromium(t)
	d := daemontest.Start(t, nil)
	admin := daemontest.NewClient(t, d)
	a := admin.As(admin.NewKey("agent-a", "agent").Key)
	id := a.NewSandbox(nil)
	pre := "/sandboxes/" + id
	a.JSON("POST", pre+"/v1/browser/page/navigate", map[string]any{"url": `data:text/html,<script>console.log("rel-log")</script>`}, http.StatusOK, nil)
	r := a.Do("POST", pre+"/v1/browser/page/console/export", map[string]any{"save_path": "console.json"})
	if r.Status != http.StatusOK || !r.Success {
		t.Fatalf("export to a relative path: %d %s", r.Status, r.Raw)
	}
	if out := a.Exec(id, "cat /workspace/console.json"); !strings.Contains(out.Stdout, "rel-log") {
		t.Fatalf("the export is not at /workspace/console.json: %+v", out)
	}
}
