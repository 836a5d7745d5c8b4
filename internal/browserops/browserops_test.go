package browserops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	_ "image/jpeg" // registers JPEG for image.DecodeConfig
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser/cdp/cdptest"
	"github.com/sandhold/sandhold/internal/browserops"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

const formPage = `<!doctype html><html><head><title>Form</title></head><body>
<h1>Sign up</h1>
<form action="/result" method="get">
  <input id="name" name="name" placeholder="Your name">
  <select id="color" name="color"><option value="r">Red</option><option value="g">Green</option></select>
  <input id="agree" name="agree" type="checkbox">
  <input id="doc" type="file">
  <button id="go" type="submit">Send</button>
</form>
<p>Some <b>bold</b> text and a <a href="/result?name=link">link</a>.</p>
<script>console.log("hello-console", 42); document.cookie = "seen=1";</script>
</body></html>`

func testServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/form", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(formPage))
	})
	mux.HandleFunc("/result", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		w.Header().Set("Content-Type", "text/html")
		_, _ = fmt.Fprintf(w, "<!doctype html><title>Result</title><p id=out>Hello %s, color %s, agree %s</p>", // #nosec G705 -- a loopback test server; each value is HTML-escaped
			html.EscapeString(q.Get("name")), html.EscapeString(q.Get("color")), html.EscapeString(q.Get("agree")))
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = fmt.Fprintf(w, "x-test=%s", r.Header.Get("X-Test")) // #nosec G705 -- a loopback test server answering text/plain
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// memFiles is a workspace stand-in: files live in a host temp dir and a
// path is used as given (the host browser opens the same path).
type memFiles struct {
	mu    sync.Mutex
	wrote map[string][]byte
}

func (m *memFiles) ReadFile(_ context.Context, _ auth.Caller, _, p string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.wrote[p]; ok {
		return b, nil
	}
	if strings.Contains(p, ".ssh") {
		return nil, fault.New(fault.Forbidden, "path is not allowed")
	}
	b, err := os.ReadFile(p) // #nosec G304 -- test files in the test's temp dir
	if err != nil {
		return nil, fault.New(fault.NotFound, "no such file")
	}
	return b, nil
}

func (m *memFiles) WriteFile(_ context.Context, _ auth.Caller, _, p string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wrote[p] = data
	return nil
}

type fixture struct {
	d     *dispatch.Dispatcher
	files *memFiles
	srv   *httptest.Server
	agent auth.Caller
}

func setup(t *testing.T) *fixture {
	t.Helper()
	b := cdptest.Start(t)
	files := &memFiles{wrote: map[string][]byte{}}
	svc := browserops.New(browserops.Config{
		Open: func(ctx context.Context, _ auth.Caller, id string) (net.Conn, error) {
			if id != "sb1" {
				return nil, fault.New(fault.NotFound, "sandbox not found")
			}
			return b.Dial(ctx)
		},
		Resolve: func(_ context.Context, _ auth.Caller, id string) (string, error) {
			switch id {
			case "", "sb1":
				return "sb1", nil
			}
			return "", fault.New(fault.NotFound, "sandbox not found")
		},
		Files:     files,
		PublicURL: "http://127.0.0.1:8080",
	})
	t.Cleanup(svc.Close)
	d := dispatch.New(dispatch.Options{})
	registerBrowserOps(d, svc)
	return &fixture{d: d, files: files, srv: testServer(t), agent: auth.Caller{KeyID: "k1", Role: auth.RoleAgent}}
}

func call[R any](t *testing.T, f *fixture, name string, args any) R {
	t.Helper()
	r, err := callErr[R](f, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func callErr[R any](f *fixture, name string, args any) (R, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, err := json.Marshal(args)
	if err != nil {
		var zero R
		return zero, err
	}
	t, ok := f.d.Tool(name)
	if !ok {
		var zero R
		return zero, fmt.Errorf("no tool %s", name)
	}
	a, err := t.Decode(raw)
	if err != nil {
		var zero R
		return zero, err
	}
	res, err := f.d.Dispatch(ctx, f.agent, name, a)
	if err != nil {
		var zero R
		return zero, err
	}
	return dispatch.ResultAs[R](name, res)
}

// The check: a test server on loopback with a form; navigate,
// fill it, click, read the result via text; a screenshot decodes as a PNG
// of the requested size.
func TestFormFlowAgainstChromium(t *testing.T) {
	f := setup(t)
	p := call[browserops.PageInfo](t, f, browserops.ToolNavigate.Name(), map[string]any{"url": f.srv.URL + "/form"})
	if p.Title != "Form" {
		t.Fatalf("navigate: title %q", p.Title)
	}
	call[browserops.Action](t, f, browserops.ToolFill.Name(), map[string]any{"selector": "#name", "text": "Ada"})
	call[browserops.Action](t, f, browserops.ToolSelect.Name(), map[string]any{"selector": "#color", "value": "g"})
	call[browserops.Action](t, f, browserops.ToolCheck.Name(), map[string]any{"selector": "#agree"})
	call[browserops.Action](t, f, browserops.ToolClick.Name(), map[string]any{"selector": "#go"})
	call[map[string]any](t, f, browserops.ToolWait.Name(), map[string]any{"type": "selector", "selector": "#out", "timeout": 20})
	text := call[string](t, f, browserops.ToolText.Name(), map[string]any{})
	if !strings.Contains(text, "Hello Ada, color g, agree on") {
		t.Fatalf("result page text %q", text)
	}

	call[browserops.ConfigResult](t, f, browserops.ToolConfig.Name(), map[string]any{"resolution": map[string]int{"width": 800, "height": 600}})
	img := call[browserops.Image](t, f, browserops.ToolScreenshot.Name(), map[string]any{})
	decoded, err := png.Decode(bytes.NewReader(img.Data))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := decoded.Bounds(); b.Dx() != 800 || b.Dy() != 600 {
		t.Fatalf("screenshot is %dx%d, want 800x600", b.Dx(), b.Dy())
	}
	jpg := call[browserops.Image](t, f, browserops.ToolScreenshot.Name(), map[string]any{"format": "jpeg", "quality": 50})
	if _, format, err := image.DecodeConfig(bytes.NewReader(jpg.Data)); err != nil || jpg.MIMEType != "image/jpeg" {
		t.Fatalf("jpeg screenshot: %v %s", err, format)
	}

	back := call[browserops.PageInfo](t, f, browserops.ToolBack.Name(), map[string]any{})
	if back.Title != "Form" {
		t.Fatalf("back: %+v", back)
	}
	fwd := call[browserops.PageInfo](t, f, browserops.ToolForward.Name(), map[string]any{})
	if fwd.Title != "Result" {
		t.Fatalf("forward: %+v", fwd)
	}
	if _, err := callErr[browserops.PageInfo](f, browserops.ToolForward.Name(), map[string]any{}); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("forward past the end: %v", err)
	}
	call[browserops.PageInfo](t, f, browserops.ToolReload.Name(), map[string]any{})
}

func TestReadingThePage(t *testing.T) {
	f := setup(t)
	call[browserops.PageInfo](t, f, browserops.ToolNavigate.Name(), map[string]any{"url": f.srv.URL + "/form", "wait_until": "domcontentloaded"})

	md := call[browserops.PageMarkdown](t, f, browserops.ToolMarkdown.Name(), map[string]any{})
	if s := md.Markdown; !strings.Contains(s, "# Sign up") || !strings.Contains(s, "**bold**") || !strings.Contains(s, "[link](") || !strings.HasSuffix(md.URL, "/form") {
		t.Fatalf("markdown: %+v", md)
	}
	html := call[string](t, f, browserops.ToolHTML.Name(), map[string]any{"outer": true})
	if !strings.HasPrefix(html, "<html") || !strings.Contains(html, `id="agree"`) {
		t.Fatalf("html: %.200q", html)
	}
	els := call[[]browserops.Element](t, f, browserops.ToolElements.Name(), map[string]any{})
	idx := -1
	for _, e := range els {
		if e.ID == "name" {
			idx = e.Index
			if e.Tag != "input" || e.Rect.Width <= 0 || e.Rect.Height <= 0 {
				t.Fatalf("element #name: %+v", e)
			}
		}
	}
	if idx < 0 {
		t.Fatalf("elements lack #name: %v", els)
	}
	// Fill by index, then type more and press a key.
	call[browserops.Action](t, f, browserops.ToolFill.Name(), map[string]any{"index": idx, "text": "Gr"})
	call[browserops.Action](t, f, browserops.ToolType.Name(), map[string]any{"text": "ace", "delay": 5})
	call[browserops.Action](t, f, browserops.ToolPressKey.Name(), map[string]any{"key": "Backspace"})
	v := call[json.RawMessage](t, f, browserops.ToolEvaluate.Name(), map[string]any{"expression": "document.querySelector('#name').value"})
	if string(v) != `"Grac"` {
		t.Fatalf("value after fill/type/backspace: %s", v)
	}
	hits := call[[]browserops.TextMatch](t, f, browserops.ToolFindText.Name(), map[string]any{"keyword": "BOLD"})
	if len(hits) != 1 || hits[0].Tag != "b" {
		t.Fatalf("find_text: %+v", hits)
	}
	logs := call[[]browserops.ConsoleEntry](t, f, browserops.ToolConsole.Name(), map[string]any{"clear": true})
	found := false
	for _, l := range logs {
		found = found || l.Text == "hello-console 42"
	}
	if !found {
		t.Fatalf("console: %+v", logs)
	}
	if logs := call[[]browserops.ConsoleEntry](t, f, browserops.ToolConsole.Name(), map[string]any{}); len(logs) != 0 {
		t.Fatalf("console not cleared: %+v", logs)
	}
	reqs := call[[]browserops.RequestEntry](t, f, browserops.ToolRequests.Name(), map[string]any{"filter": "/form"})
	if len(reqs) == 0 || reqs[len(reqs)-1].Status != 200 {
		t.Fatalf("requests: %+v", reqs)
	}
	if _, err := callErr[json.RawMessage](f, browserops.ToolEvaluate.Name(), map[string]any{"expression": "throw new Error('boom')"}); err == nil ||
		!strings.Contains(fault.Public(err), "boom") {
		t.Fatalf("a throwing evaluation: %v", err)
	}
	if _, err := callErr[browserops.Action](f, browserops.ToolClick.Name(), map[string]any{"selector": "#missing"}); err == nil {
		t.Fatal("click on a missing element succeeded")
	}
}

func TestTabsCookiesAndNetwork(t *testing.T) {
	f := setup(t)
	call[browserops.PageInfo](t, f, browserops.ToolNavigate.Name(), map[string]any{"url": f.srv.URL + "/form"})
	tabs := call[[]browserops.TabInfo](t, f, browserops.ToolTabNew.Name(), map[string]any{"url": f.srv.URL + "/result?name=tab2"})
	if len(tabs) != 2 || !tabs[1].Active {
		t.Fatalf("new tab: %+v", tabs)
	}
	if text := call[string](t, f, browserops.ToolText.Name(), map[string]any{}); !strings.Contains(text, "Hello tab2") {
		t.Fatalf("the new tab is not active: %q", text)
	}
	call[[]browserops.TabInfo](t, f, browserops.ToolTabSwitch.Name(), map[string]any{"index": 0})
	if text := call[string](t, f, browserops.ToolText.Name(), map[string]any{}); !strings.Contains(text, "Sign up") {
		t.Fatalf("switch did not change the active tab: %q", text)
	}
	tabs = call[[]browserops.TabInfo](t, f, browserops.ToolTabClose.Name(), map[string]any{"index": 1})
	if len(tabs) != 1 {
		t.Fatalf("close: %+v", tabs)
	}
	if _, err := callErr[[]browserops.TabInfo](f, browserops.ToolTabSwitch.Name(), map[string]any{"index": 5}); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("switch to a missing tab: %v", err)
	}

	cookies := call[[]*network.Cookie](t, f, browserops.ToolCookiesGet.Name(), map[string]any{"urls": f.srv.URL})
	if len(cookies) != 1 || cookies[0].Name != "seen" {
		t.Fatalf("cookies: %+v", cookies)
	}
	call[browserops.Action](t, f, browserops.ToolCookiesSet.Name(), map[string]any{"cookies": []map[string]any{{"name": "k", "value": "v", "url": f.srv.URL}}})
	if c := call[[]*network.Cookie](t, f, browserops.ToolCookiesGet.Name(), map[string]any{}); len(c) != 2 {
		t.Fatalf("after set: %+v", c)
	}
	call[map[string]any](t, f, browserops.ToolStateSave.Name(), map[string]any{"path": "state.json"})
	if !bytes.Contains(f.files.wrote["/workspace/state.json"], []byte(`"seen"`)) {
		t.Fatalf("state file: %s", f.files.wrote["/workspace/state.json"])
	}
	call[browserops.Action](t, f, browserops.ToolCookiesClear.Name(), map[string]any{})
	if c := call[[]*network.Cookie](t, f, browserops.ToolCookiesGet.Name(), map[string]any{}); len(c) != 0 {
		t.Fatalf("after clear: %+v", c)
	}
	st := call[map[string]any](t, f, browserops.ToolStateLoad.Name(), map[string]any{"path": "state.json"})
	if fmt.Sprint(st["cookies"]) != "2" {
		t.Fatalf("state load: %+v", st)
	}
	if c := call[[]*network.Cookie](t, f, browserops.ToolCookiesGet.Name(), map[string]any{}); len(c) != 2 {
		t.Fatalf("after load: %+v", c)
	}

	// Extra headers reach the server; a route mocks a URL; abort fails one.
	call[browserops.Action](t, f, browserops.ToolHeaders.Name(), map[string]any{"headers": map[string]string{"X-Test": "yes"}})
	call[browserops.PageInfo](t, f, browserops.ToolNavigate.Name(), map[string]any{"url": f.srv.URL + "/headers"})
	if text := call[string](t, f, browserops.ToolText.Name(), map[string]any{}); !strings.Contains(text, "x-test=yes") {
		t.Fatalf("extra header not sent: %q", text)
	}
	call[browserops.Action](t, f, browserops.ToolRouteAdd.Name(), map[string]any{"url_pattern": "*/mocked*",
		"response": map[string]any{"status": 200, "body": "<p>from the route</p>", "content_type": "text/html"}})
	call[browserops.PageInfo](t, f, browserops.ToolNavigate.Name(), map[string]any{"url": f.srv.URL + "/mocked"})
	if text := call[string](t, f, browserops.ToolText.Name(), map[string]any{}); !strings.Contains(text, "from the route") {
		t.Fatalf("route did not mock: %q", text)
	}
	call[browserops.Action](t, f, browserops.ToolRouteAdd.Name(), map[string]any{"url_pattern": "*/blocked", "abort": true})
	if _, err := callErr[browserops.PageInfo](f, browserops.ToolNavigate.Name(), map[string]any{"url": f.srv.URL + "/blocked"}); err == nil {
		t.Fatal("aborted route loaded")
	}
	call[browserops.Action](t, f, browserops.ToolRouteRemove.Name(), map[string]any{"url_pattern": "*/blocked"})
	call[browserops.Action](t, f, browserops.ToolRouteRemove.Name(), map[string]any{"url_pattern": "*/mocked*"})
	call[map[string]any](t, f, browserops.ToolExportHAR.Name(), map[string]any{"save_path": "net.har"})
	var har struct {
		Log struct {
			Entries []map[string]any `json:"entries"`
		} `json:"log"`
	}
	if err := json.Unmarshal(f.files.wrote["/workspace/net.har"], &har); err != nil || len(har.Log.Entries) == 0 {
		t.Fatalf("har: %v %d", err, len(har.Log.Entries))
	}
}

func TestActionsUploadAndInfo(t *testing.T) {
	f := setup(t)
	call[browserops.PageInfo](t, f, browserops.ToolNavigate.Name(), map[string]any{"url": f.srv.URL + "/form"})
	// Find the checkbox's centre, then click it with a low-level action.
	var r struct{ X, Y float64 }
	raw := call[json.RawMessage](t, f, browserops.ToolEvaluate.Name(), map[string]any{"expression": `(() => { const b = document.querySelector('#agree').getBoundingClientRect(); return {X: b.left + b.width/2, Y: b.top + b.height/2}; })()`})
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	call[browserops.ActionData](t, f, browserops.ToolActions.Name(), map[string]any{"action_type": "MOVE_TO", "x": r.X, "y": r.Y})
	ad := call[browserops.ActionData](t, f, browserops.ToolActions.Name(), map[string]any{"action_type": "CLICK"})
	if ad.Status != "success" {
		t.Fatalf("action: %+v", ad)
	}
	if v := call[json.RawMessage](t, f, browserops.ToolEvaluate.Name(), map[string]any{"expression": "document.querySelector('#agree').checked"}); string(v) != "true" {
		t.Fatalf("CLICK action did not check the box: %s", v)
	}
	if _, err := callErr[browserops.ActionData](f, browserops.ToolActions.Name(), map[string]any{"action_type": "MOVE_TO"}); fault.KindOf(err) != fault.Invalid {
		t.Fatalf("MOVE_TO without x: %v", err)
	}

	dir := t.TempDir()
	up := filepath.Join(dir, "up.txt")
	if err := os.WriteFile(up, []byte("payload"), 0o600); err != nil {
		t.Fatal(err)
	}
	call[browserops.Action](t, f, browserops.ToolUploadFile.Name(), map[string]any{"selector": "#doc", "files": []string{up}})
	if v := call[json.RawMessage](t, f, browserops.ToolEvaluate.Name(), map[string]any{"expression": "document.querySelector('#doc').files[0].name"}); string(v) != `"up.txt"` {
		t.Fatalf("upload: %s", v)
	}
	if _, err := callErr[browserops.Action](f, browserops.ToolUploadFile.Name(), map[string]any{"selector": "#doc", "files": []string{"/workspace/.ssh/id_rsa"}}); fault.KindOf(err) != fault.Forbidden {
		t.Fatalf("upload of a sensitive path: %v", err)
	}

	call[browserops.Action](t, f, browserops.ToolFillForm.Name(), map[string]any{"items": []map[string]any{
		{"selector": "#name", "value": "Bo"}, {"selector": "#color", "value": "Green"}, {"selector": "#agree", "value": false}}})
	v := call[json.RawMessage](t, f, browserops.ToolEvaluate.Name(), map[string]any{"expression": "['#name', '#color'].map(s => document.querySelector(s).value).concat(document.querySelector('#agree').checked).join()"})
	if string(v) != `"Bo,g,false"` {
		t.Fatalf("fill_form: %s", v)
	}

	info := call[browserops.BrowserInfo](t, f, browserops.ToolInfo.Name(), map[string]any{"base_url": "http://localhost:9999"})
	if info.CDPURL != "http://localhost:9999/sandboxes/sb1/cdp" || info.VNCURL != "http://localhost:9999/sandboxes/sb1/vnc/index.html" ||
		info.UserAgent == "" || info.Viewport.Width != 1280 || info.PageViewport == nil {
		t.Fatalf("info: %+v", info)
	}
	if _, err := callErr[browserops.BrowserInfo](f, browserops.ToolInfo.Name(), map[string]any{"base_url": "http://user:pw@host/x"}); fault.KindOf(err) != fault.Invalid {
		t.Fatalf("info with an odd base_url: %v", err)
	}
	det := call[browserops.CaptchaDetection](t, f, browserops.ToolCaptchaDetect.Name(), map[string]any{})
	if det.Detected || len(det.Captchas) != 0 || det.URL == "" {
		t.Fatalf("captcha detect on a plain form: %v", det)
	}
	cw := call[browserops.CaptchaWaitResult](t, f, browserops.ToolCaptchaWait.Name(), map[string]any{"timeout": 5})
	if !cw.Resolved {
		t.Fatal("captcha wait on a page without one")
	}
	res := call[map[string]any](t, f, browserops.ToolRestart.Name(), map[string]any{"mode": "soft"})
	if res["mode"] != "soft" || res["allow_file_selection_dialogs"] != true {
		t.Fatalf("restart: %v", res)
	}
	res = call[map[string]any](t, f, browserops.ToolRestart.Name(), map[string]any{"mode": "soft", "allow_file_selection_dialogs": false})
	if res["allow_file_selection_dialogs"] != false {
		t.Fatalf("restart without file dialogs: %v", res)
	}
	// The tabs intercept the chooser now: a page's picker is reported,
	// not opened (Page.fileChooserOpened instead of a dialog).
	_ = call[browserops.PageInfo](t, f, browserops.ToolNavigate.Name(), map[string]any{"url": "data:text/html,<input type=file id=f>"})
	if _, err := callErr[json.RawMessage](f, browserops.ToolEvaluate.Name(), map[string]any{"expression": "document.getElementById('f').click()"}); err != nil {
		t.Fatalf("click the file input: %v", err)
	}
	res = call[map[string]any](t, f, browserops.ToolRestart.Name(), map[string]any{"mode": "soft", "allow_file_selection_dialogs": nil})
	if res["allow_file_selection_dialogs"] != true {
		t.Fatalf("restart restoring the default: %v", res)
	}
	if _, err := callErr[map[string]any](f, browserops.ToolRestart.Name(), map[string]any{}); fault.KindOf(err) != fault.Unsupported {
		t.Fatalf("hard restart without a runtime: %v", err)
	}
}

// Another sandbox than the caller's is not found, before any browser is
// touched.
func TestOtherSandboxIsNotFound(t *testing.T) {
	f := setup(t)
	if _, err := callErr[string](f, browserops.ToolText.Name(), map[string]any{"sandbox": "sb-other"}); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("another sandbox's browser: %v", err)
	}
}

// Risk tiers: reading is safe, driving is medium, script is dangerous —
// including the script hidden in a javascript: URL and a function wait.
func TestRiskTiers(t *testing.T) {
	d := dispatch.New(dispatch.Options{})
	registerBrowserOps(d, browserops.New(browserops.Config{}))
	tier := func(name string, args any) guard.Risk {
		t.Helper()
		tool, ok := d.Tool(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		raw, _ := json.Marshal(args)
		a, err := tool.Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tool.Assess == nil {
			return tool.Risk
		}
		return tool.Assess(a).Risk
	}
	cases := []struct {
		name string
		tool string
		args any
		want guard.Risk
	}{
		{"text is safe", browserops.ToolText.Name(), map[string]any{}, guard.Safe},
		{"screenshot is safe", browserops.ToolScreenshot.Name(), map[string]any{}, guard.Safe},
		{"navigate is medium", browserops.ToolNavigate.Name(), map[string]any{"url": "https://example.com"}, guard.Medium},
		{"javascript: URL is dangerous", browserops.ToolNavigate.Name(), map[string]any{"url": " JavaScript:alert(1)"}, guard.Dangerous},
		{"new tab at javascript: is dangerous", browserops.ToolTabNew.Name(), map[string]any{"url": "javascript:1"}, guard.Dangerous},
		{"evaluate is dangerous", browserops.ToolEvaluate.Name(), map[string]any{"expression": "1"}, guard.Dangerous},
		{"function wait is dangerous", browserops.ToolWait.Name(), map[string]any{"type": "function", "expression": "true"}, guard.Dangerous},
		{"selector wait is medium", browserops.ToolWait.Name(), map[string]any{"type": "selector", "selector": "p"}, guard.Medium},
		{"click is medium", browserops.ToolClick.Name(), map[string]any{"selector": "a"}, guard.Medium},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := tier(c.tool, c.args); got != c.want {
				t.Fatalf("%s: risk %v, want %v", c.tool, got, c.want)
			}
		})
	}
	for _, tool := range d.Tools() {
		if !strings.HasPrefix(tool.Name, "browser.") || !tool.Typed() {
			t.Errorf("%s: not a typed browser.* tool", tool.Name)
		}
	}
}

// Arguments are checked before anything runs.
func TestValidation(t *testing.T) {
	d := dispatch.New(dispatch.Options{})
	registerBrowserOps(d, browserops.New(browserops.Config{}))
	c := auth.Caller{KeyID: "k", Role: auth.RoleAgent}
	cases := []struct {
		name string
		tool string
		args string
	}{
		{"chrome scheme", browserops.ToolNavigate.Name(), `{"url":"chrome://settings"}`},
		{"relative url", browserops.ToolNavigate.Name(), `{"url":"/x"}`},
		{"bad wait_until", browserops.ToolNavigate.Name(), `{"url":"http://a","wait_until":"never"}`},
		{"unknown key", browserops.ToolPressKey.Name(), `{"key":"Hyper"}`},
		{"resolution not allowed", browserops.ToolConfig.Name(), `{"resolution":{"width":1,"height":1}}`},
		{"select without choice", browserops.ToolSelect.Name(), `{"selector":"s"}`},
		{"wait selector without selector", browserops.ToolWait.Name(), `{"type":"selector"}`},
		{"route without response", browserops.ToolRouteAdd.Name(), `{"url_pattern":"*"}`},
		{"header injection", browserops.ToolHeaders.Name(), `{"headers":{"X":"a\r\nB: c"}}`},
		{"host header", browserops.ToolHeaders.Name(), `{"headers":{"Host":"evil"}}`},
		{"restart blocklist", browserops.ToolRestart.Name(), `{"url_blocklist":["x"]}`},
		{"restart allowlist", browserops.ToolRestart.Name(), `{"url_allowlist":["x"]}`},
		{"restart odd locale", browserops.ToolRestart.Name(), `{"locale":"de --no-sandbox"}`},
		{"restart locale soft", browserops.ToolRestart.Name(), `{"mode":"soft","locale":"de-DE"}`},
		{"record too fast", browserops.ToolRecord.Name(), `{"action":"start","fps":120}`},
		{"record too long", browserops.ToolRecord.Name(), `{"action":"once","duration":3600}`},
		{"downloads into etc", browserops.ToolWait.Name(), `{"type":"download","save_path":"/etc"}`},
		{"downloads into a hidden dir", browserops.ToolWait.Name(), `{"type":"download","save_path":".ssh"}`},
		{"unknown field", browserops.ToolText.Name(), `{"nope":1}`},
		{"typing too slow", browserops.ToolType.Name(), `{"text":"abcdef","delay":20000}`},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			tool, _ := d.Tool(cs.tool)
			a, err := tool.Decode(json.RawMessage(cs.args))
			if err == nil {
				_, err = d.Dispatch(context.Background(), c, cs.tool, a)
			}
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("want invalid, got %v", err)
			}
		})
	}
}

// proxy.pac follows the sandbox's egress mode; record says it is not
// supported rather than pretending.
func TestProxyPACAndRecord(t *testing.T) {
	mode := "proxy"
	d := dispatch.New(dispatch.Options{})
	registerBrowserOps(d, browserops.New(browserops.Config{
		Resolve: func(_ context.Context, _ auth.Caller, id string) (string, error) {
			if id != "" {
				return "", fault.New(fault.NotFound, "sandbox not found")
			}
			return "sb1", nil
		},
		Network: func(context.Context, auth.Caller, string) (string, error) { return mode, nil },
	}))
	f := &fixture{d: d, agent: auth.Caller{KeyID: "k1", Role: auth.RoleAgent}}
	pac := call[string](t, f, browserops.ToolProxyPAC.Name(), map[string]any{})
	if !strings.Contains(pac, `"PROXY 127.0.0.1:3128"`) || !strings.Contains(pac, "FindProxyForURL") {
		t.Fatalf("proxy-mode PAC: %s", pac)
	}
	mode = "none"
	if pac := call[string](t, f, browserops.ToolProxyPAC.Name(), map[string]any{}); strings.Contains(pac, "PROXY") {
		t.Fatalf("none-mode PAC: %s", pac)
	}
	if _, err := callErr[string](f, browserops.ToolProxyPAC.Name(), map[string]any{"sandbox": "other"}); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("another sandbox's PAC: %v", err)
	}
	if _, err := callErr[map[string]any](f, browserops.ToolRecord.Name(), map[string]any{"action": "once"}); fault.KindOf(err) != fault.Unsupported {
		t.Fatalf("record: %v", err)
	}
}

func registerBrowserOps(d *dispatch.Dispatcher, s *browserops.Service) {
	for _, t := range browserops.Tools(s) {
		d.MustRegister(t)
	}
}
