package aio

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/aiocompat/aiotest"
	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser/cdp/cdptest"
	"github.com/sandhold/sandhold/internal/browserops"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

const browserTestPage = `<!doctype html><html><head><title>Conf</title></head><body>
<h1>Conformance</h1><p>Find me here.</p>
<form action="/done"><input id="q" name="q"><select id="s"><option value="a">A</option><option value="b">B</option></select>
<input id="c" type="checkbox"><input id="f" type="file"><button id="go">Go</button></form>
<script>console.log("conf-log")</script></body></html>`

// hostFiles is a workspace stand-in for the host browser.
type hostFiles struct {
	mu    sync.Mutex
	wrote map[string][]byte
}

func (h *hostFiles) ReadFile(_ context.Context, _ auth.Caller, _, p string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.wrote[p]; ok {
		return b, nil
	}
	b, err := os.ReadFile(p) // #nosec G304 -- a test file in the test's temp dir
	if err != nil {
		return nil, fault.New(fault.NotFound, "no such file")
	}
	return b, nil
}

func (h *hostFiles) WriteFile(_ context.Context, _ auth.Caller, _, p string, data []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wrote[p] = data
	return nil
}

type browserEdge struct {
	s   *api.Server
	key string
}

func newBrowserEdge(t *testing.T) *browserEdge {
	t.Helper()
	b := cdptest.Start(t)
	srv := newServer(t)
	s, key, d := srv.Server, srv.AgentKey, srv.D
	bs := browserops.New(browserops.Config{
		Open: func(ctx context.Context, _ auth.Caller, _ string) (net.Conn, error) { return b.Dial(ctx) },
		Resolve: func(_ context.Context, _ auth.Caller, id string) (string, error) {
			if id == "" || id == "sb1" {
				return "sb1", nil
			}
			return "", fault.New(fault.NotFound, "sandbox not found")
		},
		Network: func(context.Context, auth.Caller, string) (string, error) { return "proxy", nil },
		Files:   &hostFiles{wrote: map[string][]byte{}},
	})
	t.Cleanup(bs.Close)
	registerBrowserOps(d, bs)
	BrowserRoutes(s, d)
	return &browserEdge{s: s, key: key}
}

func (e *browserEdge) do(method, target, body string) (int, http.Header, []byte) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	r.Host = "127.0.0.1:8080"
	r.RemoteAddr = "127.0.0.1:5000"
	r.Header.Set("Authorization", "Bearer "+e.key)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.s.Handler().ServeHTTP(rec, r)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// TestAIOBrowserRoutesConform calls each of AIO's 52 browser operations
// over HTTP against a host Chromium and checks every JSON answer against
// AIO's OpenAPI schema, images by decoding them; a browser route that no
// step calls fails the test.
func TestAIOBrowserRoutesConform(t *testing.T) {
	v := aiotest.Load(t)
	e := newBrowserEdge(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(browserTestPage))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	up := filepath.Join(t.TempDir(), "up.txt")
	if err := os.WriteFile(up, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	page := srv.URL + "/page"

	type step struct {
		method, path, target, body string
		image                      bool // the answer is an image
		text                       bool // the answer is text (proxy.pac)
		fail                       bool // a tool-level failure: 200, success false
	}
	steps := []step{
		{method: "GET", path: "/v1/browser/info"},
		{method: "POST", path: "/v1/browser/config", body: `{"resolution":{"width":800,"height":600}}`},
		{method: "POST", path: "/v1/browser/page/navigate", body: fmt.Sprintf(`{"url":%q}`, page)},
		{method: "GET", path: "/v1/browser/screenshot", image: true},
		{method: "GET", path: "/v1/browser/page/screenshot", target: "/v1/browser/page/screenshot?full_page=true", image: true},
		{method: "POST", path: "/v1/browser/page/click", body: `{"selector":"#q"}`},
		{method: "POST", path: "/v1/browser/page/fill", body: `{"selector":"#q","text":"hello"}`},
		{method: "POST", path: "/v1/browser/page/type", body: `{"text":"!"}`},
		{method: "POST", path: "/v1/browser/page/press_key", body: `{"key":"End"}`},
		{method: "POST", path: "/v1/browser/page/hot_key", body: `{"keys":["Shift","Home"]}`},
		{method: "POST", path: "/v1/browser/page/hover", body: `{"selector":"h1"}`},
		{method: "POST", path: "/v1/browser/page/select_option", body: `{"selector":"#s","value":"b"}`},
		{method: "POST", path: "/v1/browser/page/check", body: `{"selector":"#c"}`},
		{method: "POST", path: "/v1/browser/page/uncheck", body: `{"selector":"#c"}`},
		{method: "POST", path: "/v1/browser/page/upload_file", body: fmt.Sprintf(`{"selector":"#f","files":[%q]}`, up)},
		{method: "POST", path: "/v1/browser/page/fill_form", body: `{"items":[{"selector":"#q","value":"form"}]}`},
		{method: "POST", path: "/v1/browser/page/scroll", body: `{"direction":"down","amount":10}`},
		{method: "POST", path: "/v1/browser/page/scroll_to", body: `{"x":0,"y":0}`},
		{method: "POST", path: "/v1/browser/page/scroll_to_element", body: `{"selector":"#go"}`},
		{method: "POST", path: "/v1/browser/actions", body: `{"action_type":"MOVE_TO","x":10,"y":10}`},
		{method: "POST", path: "/v1/browser/page/record", body: `{"action":"status"}`},
		{method: "GET", path: "/v1/browser/page/html", target: "/v1/browser/page/html?outer=true"},
		{method: "GET", path: "/v1/browser/page/text"},
		{method: "GET", path: "/v1/browser/page/markdown"},
		{method: "GET", path: "/v1/browser/page/elements"},
		{method: "GET", path: "/v1/browser/page/console"},
		{method: "POST", path: "/v1/browser/page/console/export", body: `{"save_path":"console.json"}`},
		{method: "POST", path: "/v1/browser/page/evaluate", body: `{"expression":"document.title"}`},
		{method: "POST", path: "/v1/browser/page/find_text", body: `{"keyword":"find me"}`},
		{method: "POST", path: "/v1/browser/page/wait", body: `{"type":"selector","selector":"h1"}`},
		{method: "GET", path: "/v1/browser/tabs"},
		{method: "POST", path: "/v1/browser/tabs", body: `{"url":"about:blank"}`},
		{method: "PUT", path: "/v1/browser/tabs/{index}/activate", target: "/v1/browser/tabs/0/activate"},
		{method: "DELETE", path: "/v1/browser/tabs/{index}", target: "/v1/browser/tabs/1"},
		{method: "POST", path: "/v1/browser/page/navigate", body: fmt.Sprintf(`{"url":%q}`, page+"?second")},
		{method: "POST", path: "/v1/browser/page/back"},
		{method: "POST", path: "/v1/browser/page/forward"},
		{method: "POST", path: "/v1/browser/page/reload"},
		{method: "POST", path: "/v1/browser/cookies", body: fmt.Sprintf(`{"cookies":[{"name":"a","value":"1","url":%q}]}`, srv.URL)},
		{method: "GET", path: "/v1/browser/cookies", target: "/v1/browser/cookies?urls=" + url.QueryEscape(srv.URL)},
		{method: "POST", path: "/v1/browser/state/save", body: `{"path":"state.json"}`},
		{method: "DELETE", path: "/v1/browser/cookies"},
		{method: "POST", path: "/v1/browser/state/load", body: `{"path":"state.json"}`},
		{method: "POST", path: "/v1/browser/network/headers", body: `{"headers":{"X-A":"1"}}`},
		{method: "POST", path: "/v1/browser/network/scoped_headers", body: fmt.Sprintf(`{"origin":%q,"headers":{"X-B":"2"}}`, srv.URL)},
		{method: "POST", path: "/v1/browser/network/route", body: `{"url_pattern":"*/nothing","abort":true}`},
		{method: "DELETE", path: "/v1/browser/network/route", body: `{"url_pattern":"*/nothing"}`},
		{method: "GET", path: "/v1/browser/network/requests", target: "/v1/browser/network/requests?filter=page&limit=5"},
		{method: "POST", path: "/v1/browser/network/export_har", body: `{"save_path":"net.har"}`},
		{method: "GET", path: "/v1/browser/captcha/detect"},
		{method: "POST", path: "/v1/browser/captcha/wait", body: `{"timeout":2,"poll_interval":0.5}`},
		{method: "GET", path: "/v1/browser/proxy.pac", text: true},
		{method: "POST", path: "/v1/browser/restart", body: `{"mode":"soft"}`},
		// Refusals: AIO's 422 for a bad field, a tool-level failure for a
		// missing element.
		{method: "POST", path: "/v1/browser/page/click", body: `{"selector":"#nope"}`, fail: true},
	}
	covered := map[string]bool{}
	for _, sp := range steps {
		target := sp.target
		if target == "" {
			target = sp.path
		}
		covered[sp.method+" "+sp.path] = true
		t.Run(sp.method+" "+target, func(t *testing.T) {
			status, hdr, body := e.do(sp.method, target, sp.body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			switch {
			case sp.image:
				img, err := png.Decode(bytes.NewReader(body))
				if err != nil {
					t.Fatalf("not a PNG (%s): %v", hdr.Get("Content-Type"), err)
				}
				if sp.path == "/v1/browser/screenshot" && (img.Bounds().Dx() != 800 || img.Bounds().Dy() != 600) {
					t.Fatalf("display screenshot %v, want the configured 800x600", img.Bounds())
				}
			case sp.text:
				if !strings.Contains(string(body), "FindProxyForURL") || hdr.Get("Content-Type") != "application/x-ns-proxy-autoconfig" {
					t.Fatalf("PAC: %s %s", hdr.Get("Content-Type"), body)
				}
			default:
				var env struct {
					Success bool `json:"success"`
				}
				if err := json.Unmarshal(body, &env); err != nil {
					t.Fatalf("not JSON: %s", body)
				}
				if env.Success == sp.fail {
					t.Fatalf("success %v: %s", env.Success, body)
				}
				v.Check(t, sp.method, sp.path, status, body)
			}
		})
	}
	for _, rt := range aioBrowserRows {
		if !covered[rt.Method+" "+rt.Path] {
			t.Errorf("%s is served but no step calls it", rt.Method+" "+rt.Path)
		}
	}
	if len(aioBrowserRows) != 52 {
		t.Errorf("%d browser rows, AIO 1.9.4 has 52 operations", len(aioBrowserRows))
	}

	t.Run("422 for a bad field", func(t *testing.T) {
		status, _, body := e.do("POST", "/v1/browser/config", `{"resolution":{"width":1,"height":1}}`)
		if status != http.StatusUnprocessableEntity {
			t.Fatalf("status %d: %s", status, body)
		}
	})
	t.Run("the sandbox prefix", func(t *testing.T) {
		status, _, body := e.do("GET", "/sandboxes/sb1/v1/browser/page/text", "")
		if status != http.StatusOK || !bytes.Contains(body, []byte(`"success":true`)) {
			t.Fatalf("status %d: %s", status, body)
		}
		status, _, body = e.do("GET", "/sandboxes/other/v1/browser/page/text", "")
		if bytes.Contains(body, []byte(`"success":true`)) {
			t.Fatalf("another sandbox's browser answered: %d %s", status, body)
		}
	})
	t.Run("info builds its URLs from the request's host", func(t *testing.T) {
		_, _, body := e.do("GET", "/sandboxes/sb1/v1/browser/info", "")
		if !bytes.Contains(body, []byte(`"cdp_url":"http://127.0.0.1:8080/sandboxes/sb1/cdp"`)) {
			t.Fatalf("info: %s", body)
		}
	})
}

func registerBrowserOps(d *dispatch.Dispatcher, s *browserops.Service) {
	for _, t := range browserops.Tools(s) {
		d.MustRegister(t)
	}
}
