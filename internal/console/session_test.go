package console

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sandhold/sandhold/internal/dispatch/audittools"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/store"
)

// env is an API server with the console mounted, an admin and an agent key.
type env struct {
	t        *testing.T
	srv      *api.Server
	con      *Console
	svc      *auth.Service
	st       store.Store
	adminKey string
	agentKey string
	agentID  string
	now      time.Time
}

func newEnv(t *testing.T, assets fstest.MapFS) *env {
	return newEnvWith(t, assets, nil)
}

// newEnvWith is newEnv whose dispatcher has lim and a file-category tool
// served at POST /v1/test-limited.
func newEnvWith(t *testing.T, assets fstest.MapFS, lim *ratelimit.Limiter) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	lg := audit.New(st, dir)
	e := &env{t: t, st: st, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e.svc = auth.NewService(st, lg)
	var admin auth.KeyInfo
	if admin, e.adminKey, err = e.svc.CreateKey(context.Background(), auth.Caller{Role: auth.RoleAdmin}, "op", auth.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	_ = admin
	var agent auth.KeyInfo
	if agent, e.agentKey, err = e.svc.CreateKey(context.Background(), auth.Caller{Role: auth.RoleAdmin}, "agent", auth.RoleAgent); err != nil {
		t.Fatal(err)
	}
	e.agentID = agent.ID
	cfg := config.Config{DataDir: dir, Listen: "127.0.0.1:0", MaxBody: 4096, DiskBudget: 1 << 40}.WithDefaults()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.srv, err = api.New(api.Deps{Config: cfg, Auth: e.svc, Audit: lg, Logger: quiet, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	disp := dispatch.New(dispatch.Options{Audit: lg, Limiter: lim})
	e.srv.UseDispatcher(disp)
	for _, t := range append(authtools.Tools(e.svc), audittools.Tools(lg)...) {
		disp.MustRegister(t)
	}
	if err := disp.Register(dispatch.Define("test.limited", dispatch.Spec{Description: "a file-category call", Risk: guard.Safe, Category: ratelimit.File},
		func(_ context.Context, c auth.Caller, _ struct{}) (string, error) { return c.KeyID, nil }, dispatch.Hooks[struct{}, string]{})); err != nil {
		t.Fatal(err)
	}
	e.srv.Router().Post("/v1/test-limited", func(w http.ResponseWriter, r *http.Request) {
		c, err := api.MustCaller(r.Context())
		if err == nil {
			var who string
			if who, err = dispatch.Ref[struct{}, string]("test.limited").Call(r.Context(), disp, c, struct{}{}); err == nil {
				api.WriteData(w, http.StatusOK, who)
				return
			}
		}
		api.WriteError(w, r, err)
	})
	d := Deps{Auth: e.svc, Keys: st, Audit: lg, Logger: quiet}
	if assets != nil {
		d.Assets = assets
	}
	if e.con, err = Mount(e.srv, d); err != nil {
		t.Fatal(err)
	}
	e.con.sessions.now = func() time.Time { return e.now }
	return e
}

// do sends one request; hdr holds name, value pairs.
func (e *env) do(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Host = "127.0.0.1:8080"
	r.RemoteAddr = "127.0.0.1:40000"
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, r)
	return rec
}

type signedIn struct {
	cookie string // "name=value"
	csrf   string
	keyID  string
}

func (e *env) signIn(key string) signedIn {
	e.t.Helper()
	rec := e.do(http.MethodPost, SessionPath, `{"key":"`+key+`"}`)
	if rec.Code != http.StatusOK {
		e.t.Fatalf("sign in: %d %s", rec.Code, rec.Body)
	}
	var got struct {
		Data Info `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		e.t.Fatal(err)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		e.t.Fatalf("want one cookie, got %v", cookies)
	}
	return signedIn{cookie: cookies[0].Name + "=" + cookies[0].Value, csrf: got.Data.CSRFToken, keyID: got.Data.KeyID}
}

func TestSignInCookieAttributes(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.do(http.MethodPost, SessionPath, `{"key":"`+e.adminKey+`"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("sign in: %d %s", rec.Code, rec.Body)
	}
	c := rec.Result().Cookies()[0]
	if c.Name != cookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge <= 0 {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ and an expiry", c)
	}
	if c.Secure {
		t.Fatal("Secure set on a plain-HTTP sign-in: the browser would drop the cookie")
	}
	if strings.Contains(rec.Body.String(), e.adminKey) || strings.Contains(c.Value, e.adminKey) {
		t.Fatal("the key came back to the browser")
	}
	// Over TLS: Secure and the __Host- prefix.
	r := httptest.NewRequest(http.MethodPost, "https://127.0.0.1:8443"+SessionPath, strings.NewReader(`{"key":"`+e.adminKey+`"}`))
	r.Host = "127.0.0.1:8443"
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("Content-Type", "application/json")
	tls := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(tls, r)
	if tls.Code != http.StatusOK {
		t.Fatalf("TLS sign in: %d %s", tls.Code, tls.Body)
	}
	tc := tls.Result().Cookies()[0]
	if !tc.Secure || tc.Name != cookieNameSecure {
		t.Fatalf("TLS cookie %+v: want Secure and %s", tc, cookieNameSecure)
	}
}

func TestSignInRefusals(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name string
		body string
		hdr  []string
		want int
	}{
		{"wrong key", `{"key":"shk_wrongwrongwrongwrongwrongwrongwrongwrongwro"}`, nil, http.StatusUnauthorized},
		{"no key", `{}`, nil, http.StatusBadRequest},
		{"unknown field", `{"key":"` + e.adminKey + `","x":1}`, nil, http.StatusBadRequest},
		{"form post from a page", `key=x`, []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"cross-site", `{"key":"` + e.adminKey + `"}`, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"foreign origin", `{"key":"` + e.adminKey + `"}`, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.do(http.MethodPost, SessionPath, tc.body, tc.hdr...)
			if rec.Code != tc.want {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			if len(rec.Result().Cookies()) != 0 {
				t.Fatal("a refused sign-in set a cookie")
			}
		})
	}
	if e.con.sessions.Len() != 0 {
		t.Fatalf("%d sessions after refused sign-ins", e.con.sessions.Len())
	}
}

func TestCookieCSRFRules(t *testing.T) {
	e := newEnv(t, nil)
	s := e.signIn(e.adminKey)
	createKey := `{"name":"made-by-cookie","role":"viewer"}`
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   string
		hdr    []string
		want   int
	}{
		{"read with cookie", http.MethodGet, "/v1/keys", "", []string{"Cookie", s.cookie}, http.StatusOK},
		{"no cookie, no key", http.MethodGet, "/v1/keys", "", nil, http.StatusUnauthorized},
		{"unknown cookie", http.MethodGet, "/v1/keys", "", []string{"Cookie", cookieName + "=bogus"}, http.StatusUnauthorized},
		{"change without CSRF", http.MethodPost, "/v1/keys", createKey, []string{"Cookie", s.cookie}, http.StatusForbidden},
		{"change with wrong CSRF", http.MethodPost, "/v1/keys", createKey, []string{"Cookie", s.cookie, CSRFHeader, s.csrf + "x"}, http.StatusForbidden},
		{"delete without CSRF", http.MethodDelete, "/v1/keys/" + e.agentID, "", []string{"Cookie", s.cookie}, http.StatusForbidden},
		{"cross-site read", http.MethodGet, "/v1/keys", "", []string{"Cookie", s.cookie, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"same-site other origin", http.MethodPost, "/v1/keys", createKey, []string{"Cookie", s.cookie, CSRFHeader, s.csrf, "Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{"foreign origin", http.MethodPost, "/v1/keys", createKey, []string{"Cookie", s.cookie, CSRFHeader, s.csrf, "Origin", "http://evil.example"}, http.StatusForbidden},
		{"websocket with cookie", http.MethodGet, "/v1/keys", "", []string{"Cookie", s.cookie, "Upgrade", "websocket", "Connection", "Upgrade"}, http.StatusForbidden},
		{"change with CSRF", http.MethodPost, "/v1/keys", createKey, []string{"Cookie", s.cookie, CSRFHeader, s.csrf, "Origin", "http://127.0.0.1:8080", "Sec-Fetch-Site", "same-origin"}, http.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.do(tc.method, tc.path, tc.body, tc.hdr...)
			if rec.Code != tc.want {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
		})
	}
	// Exactly one key was made, by the request that carried the token.
	rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", s.cookie)
	if n := strings.Count(rec.Body.String(), "made-by-cookie"); n != 1 {
		t.Fatalf("made-by-cookie listed %d times: %s", n, rec.Body)
	}
}

// A cookie caller is the key's caller: the route's roles apply and the
// dispatcher audits the call under the key's id.
func TestCookieCallerSameDispatcher(t *testing.T) {
	e := newEnv(t, nil)
	s := e.signIn(e.agentKey)
	if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", s.cookie); rec.Code != http.StatusForbidden {
		t.Fatalf("agent session on an admin route: %d %s", rec.Code, rec.Body)
	}
	rec := e.do(http.MethodPost, "/v1/tickets", `{"scope":"terminal"}`, "Cookie", s.cookie, CSRFHeader, s.csrf)
	if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
		t.Fatalf("agent session ticket: %d %s", rec.Code, rec.Body)
	}
	recs, err := e.st.QueryAudit(context.Background(), store.AuditFilter{Actor: e.agentID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var sawDeny, sawTicket bool
	for _, r := range recs {
		sawDeny = sawDeny || (r.Verdict == "denied" && strings.Contains(r.Action, "keys"))
		sawTicket = sawTicket || r.Action == "ticket.create"
	}
	if !sawDeny || !sawTicket {
		t.Fatalf("audit of the cookie caller: deny=%v ticket=%v in %+v", sawDeny, sawTicket, recs)
	}
}

func TestSignOutEndsSession(t *testing.T) {
	e := newEnv(t, nil)
	s := e.signIn(e.adminKey)
	if rec := e.do(http.MethodDelete, SessionPath, "", "Cookie", s.cookie); rec.Code != http.StatusForbidden {
		t.Fatalf("sign-out without CSRF: %d", rec.Code)
	}
	rec := e.do(http.MethodDelete, SessionPath, "", "Cookie", s.cookie, CSRFHeader, s.csrf)
	if rec.Code != http.StatusOK {
		t.Fatalf("sign-out: %d %s", rec.Code, rec.Body)
	}
	if c := rec.Result().Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Fatalf("sign-out must clear the cookie: %v", c)
	}
	if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", s.cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("after sign-out: %d", rec.Code)
	}
	if rec := e.do(http.MethodGet, SessionPath, "", "Cookie", s.cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("session info after sign-out: %d", rec.Code)
	}
}

func TestRevokedKeyEndsSession(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.signIn(e.adminKey)
	agent := e.signIn(e.agentKey)
	if rec := e.do(http.MethodGet, SessionPath, "", "Cookie", agent.cookie); rec.Code != http.StatusOK {
		t.Fatalf("agent session info: %d %s", rec.Code, rec.Body)
	}
	rec := e.do(http.MethodDelete, "/v1/keys/"+e.agentID, "", "Cookie", admin.cookie, CSRFHeader, admin.csrf)
	if rec.Code != http.StatusOK {
		t.Fatalf("revoke: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(http.MethodPost, "/v1/tickets", `{"scope":"terminal"}`, "Cookie", agent.cookie, CSRFHeader, agent.csrf); rec.Code != http.StatusUnauthorized {
		t.Fatalf("revoked key's session: %d %s", rec.Code, rec.Body)
	}
	if e.con.sessions.Len() != 1 {
		t.Fatalf("sessions left: %d, want the admin's only", e.con.sessions.Len())
	}
}

// The store is read on every request: a revocation the hook did not see
// (another node of a cluster) still ends the session.
func TestRevokedInStoreEndsSession(t *testing.T) {
	e := newEnv(t, nil)
	agent := e.signIn(e.agentKey)
	if _, err := e.st.RevokeKey(context.Background(), e.agentID, e.now); err != nil {
		t.Fatal(err)
	}
	if rec := e.do(http.MethodGet, "/v1/control", "", "Cookie", agent.cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("session of a key revoked in the store: %d %s", rec.Code, rec.Body)
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, nil)
	s := e.signIn(e.adminKey)
	e.now = e.now.Add(SessionIdle - time.Minute)
	if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", s.cookie); rec.Code != http.StatusOK {
		t.Fatalf("inside the idle window: %d", rec.Code)
	}
	e.now = e.now.Add(SessionIdle)
	if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", s.cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("after the idle window: %d", rec.Code)
	}
	// Absolute: used every half hour, it still ends at SessionMax.
	s = e.signIn(e.adminKey)
	for used := time.Duration(0); used < SessionMax-time.Hour; used += 30 * time.Minute {
		e.now = e.now.Add(30 * time.Minute)
		if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", s.cookie); rec.Code != http.StatusOK {
			t.Fatalf("in use after %v: %d", used, rec.Code)
		}
	}
	e.now = e.now.Add(2 * time.Hour)
	if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", s.cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("after the absolute lifetime: %d", rec.Code)
	}
}

func TestSessionsPerKeyCapped(t *testing.T) {
	e := newEnv(t, nil)
	first := e.signIn(e.adminKey)
	for range maxSessionsPerKey {
		e.now = e.now.Add(time.Second)
		e.signIn(e.adminKey)
	}
	if n := e.con.sessions.Len(); n != maxSessionsPerKey {
		t.Fatalf("%d sessions, want the cap %d", n, maxSessionsPerKey)
	}
	if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", first.cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("the oldest session survived the cap: %d", rec.Code)
	}
}

func TestPagesAndAssets(t *testing.T) {
	built := fstest.MapFS{
		"index.html":        {Data: []byte("<!doctype html><title>console</title>")},
		"vnc.html":          {Data: []byte("<!doctype html><title>vnc</title>")},
		"assets/app.js":     {Data: []byte("console.log(1)")},
		"assets/.hidden.js": {Data: []byte("x")},
		"docs.html":         {Data: []byte("<!doctype html><title>sandhold API reference</title>")},
	}
	e := newEnv(t, built)
	// /docs is the console's Redoc page, under its own CSP: scripts only
	// from here, Redoc's search worker from a blob, nothing else.
	rec := e.do(http.MethodGet, "/docs", "")
	csp := rec.Header().Get("Content-Security-Policy")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "API reference") || !strings.Contains(csp, "script-src 'self';") ||
		!strings.Contains(csp, "worker-src blob:") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("/docs: %d %q csp %q", rec.Code, rec.Body, csp)
	}
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/", "<title>console</title>", 200},
		{"/console/assets/app.js", "console.log", 200},
		{"/console/assets/.hidden.js", "", 404},
		{"/console/assets/../index.html", "", 404},
		{"/console/assets/", "", 404},
		{"/sandboxes/sb1/vnc/index.html?ticket=sht_x", "<title>vnc</title>", 200},
	} {
		rec := e.do(http.MethodGet, tc.path, "")
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %q, want %d %q", tc.path, rec.Code, rec.Body, tc.code, tc.want)
		}
		if tc.code == 200 && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: no CSP", tc.path)
		}
	}
	// Unbuilt: the page says how to build.
	e2 := newEnv(t, fstest.MapFS{})
	if rec := e2.do(http.MethodGet, "/docs", ""); rec.Code != 200 || strings.Contains(rec.Header().Get("Content-Security-Policy"), "worker-src") {
		t.Errorf("unbuilt /docs: %d %q (the API's own page, not Redoc's)", rec.Code, rec.Header().Get("Content-Security-Policy"))
	}
	if rec := e2.do(http.MethodGet, "/", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), "make build") {
		t.Fatalf("unbuilt page: %d %s", rec.Code, rec.Body)
	}
}

// The cookie caller spends the key's own rate-limit bucket: the limit is
// the same whether the key calls directly or through the console.
func TestCookieCallerSharesKeyRateLimit(t *testing.T) {
	lim := ratelimit.New(ratelimit.Options{Rules: ratelimit.Rules{ratelimit.File: {PerMinute: 1, Burst: 2}}})
	e := newEnvWith(t, nil, lim)
	s := e.signIn(e.agentKey)
	for i := range 2 {
		rec := e.do(http.MethodPost, "/v1/test-limited", "", "Cookie", s.cookie, CSRFHeader, s.csrf)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), e.agentID) {
			t.Fatalf("call %d through the session: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	if rec := e.do(http.MethodPost, "/v1/test-limited", "", "Authorization", "Bearer "+e.agentKey); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("the key after its session spent the bucket: %d %s, want 429", rec.Code, rec.Body)
	}
	rec := e.do(http.MethodPost, "/v1/test-limited", "", "Cookie", s.cookie, CSRFHeader, s.csrf)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("the session over the limit: %d %v, want 429 with Retry-After", rec.Code, rec.Header())
	}
}

// Signing in again from the same browser ends the session it had.
func TestSignInReplacesSession(t *testing.T) {
	e := newEnv(t, nil)
	first := e.signIn(e.adminKey)
	rec := e.do(http.MethodPost, SessionPath, `{"key":"`+e.agentKey+`"}`, "Cookie", first.cookie)
	if rec.Code != http.StatusOK {
		t.Fatalf("second sign-in: %d %s", rec.Code, rec.Body)
	}
	if got := e.do(http.MethodGet, "/v1/keys", "", "Cookie", first.cookie); got.Code != http.StatusUnauthorized {
		t.Fatalf("the replaced admin session still works: %d", got.Code)
	}
	if n := e.con.sessions.Len(); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
}

// A key header or a ticket decides over the cookie: a request carrying
// both is the key's, never a mix.
func TestKeyHeaderWinsOverCookie(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.signIn(e.adminKey)
	if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", admin.cookie, "Authorization", "Bearer "+e.agentKey); rec.Code != http.StatusForbidden {
		t.Fatalf("admin cookie + agent key: %d, want the agent's 403", rec.Code)
	}
	agent := e.signIn(e.agentKey)
	if rec := e.do(http.MethodGet, "/v1/keys", "", "Cookie", agent.cookie, "X-API-Key", e.adminKey); rec.Code != http.StatusOK {
		t.Fatalf("agent cookie + admin key: %d, want the admin's 200", rec.Code)
	}
	if rec := e.do(http.MethodGet, "/v1/keys?ticket=sht_bogus", "", "Cookie", admin.cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("admin cookie + a bad ticket: %d, want the ticket's 401", rec.Code)
	}
}

// TestCookieCallerKeepsKeyOwnLimits: a key created with its own rate
// limits is held to them through a console session too.
func TestCookieCallerKeepsKeyOwnLimits(t *testing.T) {
	lim := ratelimit.New(ratelimit.Options{})
	e := newEnvWith(t, nil, lim)
	_, key, err := e.svc.CreateKeyWithLimits(context.Background(), auth.Caller{Role: auth.RoleAdmin}, "slow", auth.RoleAgent, "file=2/m")
	if err != nil {
		t.Fatal(err)
	}
	s := e.signIn(key)
	for i := range 2 {
		if rec := e.do(http.MethodPost, "/v1/test-limited", "", "Cookie", s.cookie, CSRFHeader, s.csrf); rec.Code != http.StatusOK {
			t.Fatalf("call %d through the session: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	if rec := e.do(http.MethodPost, "/v1/test-limited", "", "Cookie", s.cookie, CSRFHeader, s.csrf); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("3rd call under file=2/m through the session: %d %s, want 429", rec.Code, rec.Body)
	}
}
