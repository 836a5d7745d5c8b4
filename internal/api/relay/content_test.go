package relay

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/api/apitest"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// attackerPage is what a hostile sandbox serves on every port: a page that
// would use a signed-in operator's session if it ran with the console's
// authority.
const attackerPage = `<!doctype html><script>fetch('/console/session').then(r=>r.json()).then(s=>fetch('/v1/keys',{method:'POST',headers:{'X-CSRF-Token':s.data.csrf_token,'Content-Type':'application/json'},body:'{"name":"x","role":"admin"}'}))</script>`

// fakeSandbox answers like a sandbox's servers: DevTools' /json/version
// as JSON, anything else as the attacker's HTML (what a process squatting
// on 9222 serves).
func fakeSandbox(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/json/version" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"Browser":"Chrome/1","webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/browser/x"}`)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, attackerPage)
	}))
	t.Cleanup(ts.Close)
	return ts.Listener.Addr().String()
}

// cookieSessions stands in for the console: a request with the cookie
// "console=1" is the admin's session.
type cookieSessions struct{}

func (cookieSessions) Public(*http.Request) bool { return false }
func (cookieSessions) Carries(r *http.Request) bool {
	c, err := r.Cookie("console")
	return err == nil && c.Value == "1"
}
func (cookieSessions) Authenticate(*http.Request) (auth.Caller, error) {
	return auth.Caller{KeyID: auth.AdminKeyID, Role: auth.RoleAdmin, ViaSession: true}, nil
}

// contentServer is a server with the relay routes, whose relay tools
// connect to a fake sandbox at addr, the console's cookie stand-in, and
// the content origin configured by mutate.
type contentServer struct {
	s      *apitest.Server
	relays *Relays
	key    string
	calls  int
}

func newContentServer(t *testing.T, mutate func(*config.Config)) *contentServer {
	t.Helper()
	srv := apitest.New(t, func(c *config.Config) {
		c.Listen, c.MaxBody = "127.0.0.1:8080", 4096
		if mutate != nil {
			mutate(c)
		}
	})
	cs := &contentServer{s: srv, key: srv.AgentKey}
	d := srv.D
	addr := fakeSandbox(t)
	open := func(id string, port int) (*browser.Relay, error) {
		cs.calls++
		if id != "" && id != "sbx" {
			return nil, fault.New(fault.NotFound, "no such sandbox")
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		return &browser.Relay{Conn: c, Sandbox: "sbx", Port: port}, nil
	}
	agents := []auth.Role{auth.RoleAdmin, auth.RoleAgent}
	d.MustRegister(dispatch.Define(browser.ToolPreview, dispatch.Spec{Description: "fake", Risk: guard.Safe, Roles: agents},
		func(_ context.Context, _ auth.Caller, a browser.PreviewArgs) (*browser.Relay, error) {
			return open(a.Sandbox, a.Port)
		},
		dispatch.Hooks[browser.PreviewArgs, *browser.Relay]{}))
	d.MustRegister(dispatch.Define(browser.ToolCDP, dispatch.Spec{Description: "fake", Risk: guard.Safe, Roles: agents},
		func(_ context.Context, _ auth.Caller, a browser.ConnectArgs) (*browser.Relay, error) {
			return open(a.Sandbox, 9222)
		},
		dispatch.Hooks[browser.ConnectArgs, *browser.Relay]{}))
	cs.relays = Routes(srv.Server, d, srv.Audit, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cs.s.UseSessionAuth(cookieSessions{})
	return cs
}

// do sends one request to h with Host host and the given headers.
func (cs *contentServer) do(h http.Handler, method, host, path string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.Host = host
	r.RemoteAddr = "127.0.0.1:40000"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// The console's cookie never opens a relay (issue 29, row 1: a signed-in
// operator's link to /sandboxes/{id}/cdp/json/… ran a sandbox's page with
// the console's authority); on other routes it still works.
func TestConsoleCookieNeverOpensARelay(t *testing.T) {
	cs := newContentServer(t, nil)
	h := cs.s.Handler()
	for _, path := range []string{
		"/sandboxes/sbx/cdp/json/anything", "/sandboxes/sbx/cdp/json/version", "/sandboxes/sbx/proxy/3000/",
		"/sandboxes/sbx/absproxy/3000/x", "/proxy/3000/", "/sandboxes/sbx/vnc/websockify",
	} {
		rec := cs.do(h, "GET", "127.0.0.1:8080", path, "Cookie", "console=1", "Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate")
		if rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "<script") {
			t.Errorf("%s with the console's cookie: %d %.200s", path, rec.Code, rec.Body)
		}
	}
	if cs.calls != 0 {
		t.Fatalf("the relay tools ran %d times for cookie requests", cs.calls)
	}
	if rec := cs.do(h, "GET", "127.0.0.1:8080", "/v1/audit", "Cookie", "console=1"); rec.Code != http.StatusOK {
		t.Fatalf("the cookie elsewhere: %d %s", rec.Code, rec.Body)
	}
}

// Every relayed answer carries a CSP sandbox policy and nosniff, on both
// origins; DevTools' /json answers only JSON; a non-upgrade /devtools/…
// never reaches the sandbox.
func TestRelayedAnswersAreSandboxed(t *testing.T) {
	cs := newContentServer(t, func(c *config.Config) { c.ContentDomain = "sandbox.test"; c.ContentListen = "127.0.0.1:0" })
	main, content := cs.s.Handler(), cs.s.ContentHandler()
	key := []string{"X-API-Key", cs.key}
	for _, tc := range []struct {
		name          string
		h             http.Handler
		host, path    string
		status        int
		csp           string // a policy the answer must carry
		sameOrigin    bool   // allow-same-origin in it
		htmlForbidden bool
	}{
		{"preview on the console's origin", main, "127.0.0.1:8080", "/sandboxes/sbx/proxy/3000/", 200, previewSandbox, false, false},
		{"preview on the content listener", content, "127.0.0.1:8081", "/sandboxes/sbx/proxy/3000/", 200, previewSandbox, false, false},
		{"preview on its content host", main, "3000-sbx.sandbox.test:8080", "/", 200, previewSandbox, true, false},
		{"devtools json on the console's origin", main, "127.0.0.1:8080", "/sandboxes/sbx/cdp/json/version", 200, sandboxCSP, false, true},
		{"devtools json on the content host", main, "9222-sbx.sandbox.test:8080", "/json/version", 200, sandboxCSP, false, true},
		{"html from 9222's /json: refused", main, "127.0.0.1:8080", "/sandboxes/sbx/cdp/json/list", 503, "", false, true},
		{"html from 9222's /json on the content host: refused", content, "9222-sbx.sandbox.test", "/json/list", 503, "", false, true},
		{"the DevTools front-end: refused", main, "127.0.0.1:8080", "/sandboxes/sbx/cdp/devtools/inspector.html", 404, "", false, true},
		{"the DevTools front-end on the content host: refused", main, "9222-sbx.sandbox.test:8080", "/devtools/inspector.html", 404, "", false, true},
		{"another DevTools path: refused", main, "127.0.0.1:8080", "/sandboxes/sbx/cdp/other", 404, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := cs.do(tc.h, "GET", tc.host, tc.path, key...)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %.300s", rec.Code, tc.status, rec.Body)
			}
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
			if tc.htmlForbidden && (strings.Contains(rec.Body.String(), "<script") || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json")) {
				t.Errorf("answer %q: %.200s", rec.Header().Get("Content-Type"), rec.Body)
			}
			if tc.csp == "" {
				return
			}
			csp := strings.Join(rec.Header().Values("Content-Security-Policy"), ", ")
			if !strings.Contains(csp, tc.csp) || strings.Contains(csp, "allow-same-origin") != tc.sameOrigin {
				t.Errorf("CSP %q, want %q (allow-same-origin: %v)", csp, tc.csp, tc.sameOrigin)
			}
		})
	}
}

// The content origin never takes the console's cookie, answers only its
// hosts, and refuses requests from other origins.
func TestContentOriginRules(t *testing.T) {
	cs := newContentServer(t, func(c *config.Config) { c.ContentDomain = "sandbox.test"; c.ContentListen = "127.0.0.1:0" })
	main, content := cs.s.Handler(), cs.s.ContentHandler()
	for _, tc := range []struct {
		name       string
		h          http.Handler
		host, path string
		hdr        []string
		want       int
	}{
		{"console cookie on a content host", main, "3000-sbx.sandbox.test:8080", "/", []string{"Cookie", "console=1"}, 401},
		{"console cookie on the content listener", content, "127.0.0.1:8081", "/sandboxes/sbx/proxy/3000/", []string{"Cookie", "console=1"}, 401},
		{"the console's API is not on the content origin", content, "127.0.0.1:8081", "/v1/audit", []string{"X-API-Key", cs.key}, 404},
		{"nor on a content host", main, "9222-sbx.sandbox.test:8080", "/v1/keys", []string{"X-API-Key", cs.key}, 404},
		{"a foreign Host on the listener", content, "evil.example:8081", "/sandboxes/sbx/proxy/3000/", []string{"X-API-Key", cs.key}, 421},
		{"another origin's request", main, "3000-sbx.sandbox.test:8080", "/", []string{"X-API-Key", cs.key, "Origin", "http://3000-other.sandbox.test:8080"}, 403},
		{"an opaque origin's request", content, "127.0.0.1:8081", "/sandboxes/sbx/proxy/3000/", []string{"X-API-Key", cs.key, "Origin", "null"}, 403},
		{"its own origin's request", main, "3000-sbx.sandbox.test:8080", "/", []string{"X-API-Key", cs.key, "Origin", "http://3000-sbx.sandbox.test:8080"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rec := cs.do(tc.h, "GET", tc.host, tc.path, tc.hdr...); rec.Code != tc.want {
				t.Fatalf("%d, want %d: %.300s", rec.Code, tc.want, rec.Body)
			}
		})
	}
}

// A browser navigating to a path form on the console's origin is sent to
// the content origin, its ticket unspent; API clients are served there.
func TestNavigationsGoToTheContentOrigin(t *testing.T) {
	nav := []string{"Sec-Fetch-Mode", "navigate"}
	for _, tc := range []struct {
		name, listen, domain, path string
		hdr                        []string
		want                       string // Location ("" : not redirected)
	}{
		{"preview to its host", "", "sandbox.test", "/sandboxes/sbx/proxy/3000/a/b?ticket=T", nav, "http://3000-sbx.sandbox.test:8080/a/b?ticket=T"},
		{"absproxy keeps its path", "", "sandbox.test", "/sandboxes/sbx/absproxy/3000/a", nav, "http://3000-sbx.sandbox.test:8080/sandboxes/sbx/absproxy/3000/a"},
		{"devtools to 9222", "", "sandbox.test", "/sandboxes/sbx/cdp/json/x", nav, "http://9222-sbx.sandbox.test:8080/json/x"},
		{"a desktop with a ticket to 5900", "", "sandbox.test", "/sandboxes/sbx/vnc/index.html?ticket=T", nav, "http://5900-sbx.sandbox.test:8080/index.html?ticket=T"},
		{"preview to the listener", "127.0.0.1:18081", "", "/sandboxes/sbx/proxy/3000/a?ticket=T", nav, "http://127.0.0.1:18081/sandboxes/sbx/proxy/3000/a?ticket=T"},
		{"an API client stays", "", "sandbox.test", "/sandboxes/sbx/proxy/3000/a", nil, ""},
		{"without a content origin", "", "", "/sandboxes/sbx/proxy/3000/a", nav, ""},
		{"the console's own pages stay", "", "sandbox.test", "/sandboxes/sbx/vnc/index.html", nav, ""},
		{"an id that would move the host stays", "", "sandbox.test", "/sandboxes/evil.example%23/proxy/3000/a", nav, ""},
		{"an id with userinfo stays", "", "sandbox.test", "/sandboxes/x@evil.example/cdp/json", nav, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newContentServer(t, func(c *config.Config) { c.ContentDomain = tc.domain; c.ContentListen = tc.listen })
			if tc.listen != "" {
				cs.s.SetContentAddr(tc.listen)
			}
			rec := cs.do(cs.s.Handler(), "GET", "127.0.0.1:8080", tc.path, tc.hdr...)
			got := ""
			if rec.Code == http.StatusTemporaryRedirect {
				got = rec.Header().Get("Location")
			}
			if got != tc.want {
				t.Fatalf("%d Location %q, want %q", rec.Code, got, tc.want)
			}
			if tc.want != "" && cs.calls != 0 {
				t.Fatal("the relay ran for a redirected navigation")
			}
		})
	}
}

// A preview ticket on a browser's navigation to a content host starts a
// content session bound to that host: the page's resources come with its
// cookie, another host's requests and other origins' do not pass.
func TestContentSessions(t *testing.T) {
	cs := newContentServer(t, func(c *config.Config) { c.ContentDomain = "sandbox.test" })
	h := cs.s.Handler()
	mint := func(scope string) string {
		t.Helper()
		tk, _, err := cs.s.Auth.IssueTicket(context.Background(), mustAuth(t, cs), auth.TicketScope(scope))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	host := "3000-sbx.sandbox.test:8080"
	rec := cs.do(h, "GET", host, "/?ticket="+mint("preview"), "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Site", "cross-site")
	if rec.Code != http.StatusOK {
		t.Fatalf("navigation with a preview ticket: %d %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != "sandhold_content" || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Domain != "" {
		t.Fatalf("cookies %+v", cookies)
	}
	ck := cookies[0].Name + "=" + cookies[0].Value
	for _, tc := range []struct {
		name, host string
		hdr        []string
		want       int
	}{
		{"a resource of the page", host, []string{"Cookie", ck, "Sec-Fetch-Site", "same-origin"}, 200},
		{"a reload", host, []string{"Cookie", ck, "Sec-Fetch-Site", "none"}, 200},
		{"another sandbox's page riding it", host, []string{"Cookie", ck, "Sec-Fetch-Site", "same-site"}, 403},
		{"another site", host, []string{"Cookie", ck, "Sec-Fetch-Site", "cross-site"}, 403},
		{"on another port's host", "3001-sbx.sandbox.test:8080", []string{"Cookie", ck, "Sec-Fetch-Site", "none"}, 401},
		{"on the DevTools host", "9222-sbx.sandbox.test:8080", []string{"Cookie", ck}, 401},
		{"a forged session", host, []string{"Cookie", "sandhold_content=forged"}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/page"
			if strings.HasPrefix(tc.host, "9222-") {
				path = "/json/version"
			}
			if rec := cs.do(h, "GET", tc.host, path, tc.hdr...); rec.Code != tc.want {
				t.Fatalf("%d, want %d: %.200s", rec.Code, tc.want, rec.Body)
			}
		})
	}
	// A ticket of another scope starts nothing.
	if rec := cs.do(h, "GET", host, "/?ticket="+mint("terminal"), "Sec-Fetch-Mode", "navigate"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a terminal ticket on a preview host: %d", rec.Code)
	}
	// Revoking the key ends its sessions.
	cs.relays.Revoke(mustAuth(t, cs).KeyID)
	if rec := cs.do(h, "GET", host, "/page", "Cookie", ck); rec.Code != http.StatusUnauthorized {
		t.Fatalf("after revocation: %d", rec.Code)
	}
}

func mustAuth(t *testing.T, cs *contentServer) auth.Caller {
	t.Helper()
	c, err := cs.s.Auth.Authenticate(context.Background(), "127.0.0.1", auth.Credential{Key: cs.key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
