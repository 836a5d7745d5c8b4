package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/store"
)

// edgeServer is a server with the real (default) lockout, an operator-chosen
// admin key and a generated agent key.
type edgeServer struct {
	s        *Server
	opKey    string // guessable shape: SANDBOX_API_KEY chosen by the operator
	agentKey string // generated: shk_ + 43 chars
	now      time.Time
}

func newEdgeServer(t *testing.T) *edgeServer {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	lg := audit.New(st, dir)
	e := &edgeServer{opKey: "operator-chosen-admin-key-0123456789", now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	svc := auth.NewService(st, lg, auth.WithClock(func() time.Time { return e.now }))
	if err := svc.EnsureAdmin(context.Background(), e.opKey); err != nil {
		t.Fatal(err)
	}
	if _, e.agentKey, err = svc.CreateKey(context.Background(), auth.Caller{Role: auth.RoleAdmin}, "agent", auth.RoleAgent); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{DataDir: dir, Listen: "127.0.0.1:0", MaxBody: 4096}.WithDefaults()
	e.s, err = New(Deps{Config: cfg, Auth: svc, Audit: lg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	useFoundation(e.s, dispatch.New(dispatch.Options{Audit: lg}))
	return e
}

// req sends one request from remote (ip:port); hdr values are set raw, so
// bytes net/http's client would refuse still reach the handler.
func (e *edgeServer) req(method, path, remote, body string, hdr map[string]string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Host = "127.0.0.1"
	r.RemoteAddr = remote
	for k, v := range hdr {
		r.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	rec := httptest.NewRecorder()
	e.s.Handler().ServeHTTP(rec, r)
	return rec
}

func TestJSONRoutesRefuseOtherContentTypes(t *testing.T) {
	e := newEdgeServer(t)
	ran := 0
	// A plain (non-huma) JSON handler, like exec: it must not run.
	e.s.Router().Post("/v1/test-plain", func(w http.ResponseWriter, r *http.Request) {
		ran++
		w.WriteHeader(http.StatusNoContent)
	})
	// An upload route takes multipart.
	e.s.UseTable(uploadTable{}) // the upload's row: its media types
	e.s.Router().Post("/sandboxes/{id}/v1/file/upload", func(w http.ResponseWriter, r *http.Request) {
		ran++
		w.WriteHeader(http.StatusNoContent)
	})
	body := `{"name":"n","role":"agent"}`
	auth := map[string]string{"Authorization": "Bearer " + e.agentKey}
	admin := map[string]string{"Authorization": "Bearer " + e.opKey}
	with := func(h map[string]string, ct string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		if ct != "" {
			out["Content-Type"] = ct
		}
		return out
	}
	refused := []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/cbor", "application/xml", "text/json", "application/jsonx", "garbage/"}
	for _, ct := range refused {
		t.Run("refuse "+ct, func(t *testing.T) {
			if rec := e.req("POST", "/v1/test-plain", "10.0.0.1:1", body, with(auth, ct)); rec.Code != http.StatusUnsupportedMediaType {
				t.Fatalf("plain handler: %d %s", rec.Code, rec.Body)
			}
			if rec := e.req("POST", "/v1/keys", "10.0.0.1:1", body, with(admin, ct)); rec.Code != http.StatusUnsupportedMediaType ||
				!strings.Contains(rec.Body.String(), `"unsupported_media_type"`) {
				t.Fatalf("huma route: %d %s", rec.Code, rec.Body)
			}
		})
	}
	if ran != 0 {
		t.Fatalf("handler ran %d times on refused content types", ran)
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json", ""} {
		if rec := e.req("POST", "/v1/test-plain", "10.0.0.1:1", body, with(auth, ct)); rec.Code != http.StatusNoContent {
			t.Errorf("%q refused: %d %s", ct, rec.Code, rec.Body)
		}
	}
	if rec := e.req("POST", "/v1/keys", "10.0.0.1:1", body, with(admin, "application/json")); rec.Code != http.StatusCreated {
		t.Errorf("json key create: %d %s", rec.Code, rec.Body)
	}
	// Upload routes: multipart and raw bytes, never a form or text.
	for ct, want := range map[string]int{
		"multipart/form-data; boundary=x":   http.StatusNoContent,
		"application/octet-stream":          http.StatusNoContent,
		"text/plain":                        http.StatusUnsupportedMediaType,
		"application/x-www-form-urlencoded": http.StatusUnsupportedMediaType,
	} {
		if rec := e.req("POST", "/sandboxes/sb1/v1/file/upload", "10.0.0.1:1", "x", with(auth, ct)); rec.Code != want {
			t.Errorf("upload %s: %d, want %d", ct, rec.Code, want)
		}
	}
	// No body: no content type needed.
	if rec := e.req("POST", "/v1/test-plain", "10.0.0.1:1", "", auth); rec.Code != http.StatusNoContent {
		t.Errorf("empty body: %d", rec.Code)
	}
}

func TestMethodOverrideRefused(t *testing.T) {
	e := newEdgeServer(t)
	admin := "Bearer " + e.opKey
	for _, h := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "x-http-method-override"} {
		rec := e.req("POST", "/v1/keys", "10.0.0.1:1", `{"name":"n","role":"agent"}`,
			map[string]string{"Authorization": admin, "Content-Type": "application/json", h: "DELETE"})
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", h, rec.Code, rec.Body)
		}
	}
	for _, q := range []string{"_method=DELETE", "x-http-method-override=PUT"} {
		if rec := e.req("GET", "/v1/keys?"+q, "10.0.0.1:1", "", map[string]string{"Authorization": admin}); rec.Code != http.StatusBadRequest {
			t.Errorf("?%s: %d %s", q, rec.Code, rec.Body)
		}
	}
	if rec := e.req("GET", "/v1/keys", "10.0.0.1:1", "", map[string]string{"Authorization": admin}); rec.Code != http.StatusOK {
		t.Fatalf("plain request: %d", rec.Code)
	}
}

// TestKeyVariantsOverHTTP: odd bytes around a valid key are 401 (never
// 500) through the whole middleware chain, and count toward the lockout.
func TestKeyVariantsOverHTTP(t *testing.T) {
	e := newEdgeServer(t)
	k := e.agentKey
	variants := map[string]string{
		"NBSP":         k + "\u00a0",
		"zero-width":   k + "\u200b",
		"vertical tab": k + "\v",
		"NUL":          k + "\x00",
		"upper case":   strings.ToUpper(k),
		"U+0085":       k + "\u0085",
	}
	n := 0
	for name, v := range variants {
		for _, h := range []string{"Authorization", "X-API-Key"} {
			val := v
			if h == "Authorization" {
				val = "Bearer " + v
			}
			rec := e.req("GET", "/v1/audit", "198.51.100.7:1", "", map[string]string{h: val})
			n++
			want := http.StatusUnauthorized
			if n >= auth.DefaultLockoutLimit {
				want = http.StatusTooManyRequests
			}
			if rec.Code != want {
				t.Errorf("%s in %s (attempt %d): %d %s, want %d", name, h, n, rec.Code, rec.Body, want)
			}
		}
	}
	// Locked now: a guessable key from that address is refused, the
	// generated key still works.
	if rec := e.req("GET", "/v1/audit", "198.51.100.7:1", "", map[string]string{"Authorization": "Bearer " + e.opKey}); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("guessable key from a locked remote address: %d", rec.Code)
	}
	if rec := e.req("GET", "/v1/audit", "198.51.100.7:1", "", map[string]string{"Authorization": "Bearer " + k}); rec.Code != http.StatusOK {
		t.Errorf("generated key from a locked address: %d %s", rec.Code, rec.Body)
	}
}

// TestKeyVariantsOnTheWire sends the odd bytes over a real connection:
// net/http refuses control characters in header values itself (400), the
// rest are 401; never 500, never accepted.
func TestKeyVariantsOnTheWire(t *testing.T) {
	e := newEdgeServer(t)
	srv := httptest.NewServer(e.s.Handler())
	defer srv.Close()
	for _, v := range []string{e.agentKey + "\u00a0", e.agentKey + "\v", e.agentKey + "\x00", e.agentKey + "\u200b"} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "GET /v1/audit HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: "+v+"\r\nConnection: close\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		_ = c.Close()
		if res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %d", v, res.StatusCode)
		}
	}
}

// TestLockoutDoesNotLockOutTheOperator: a buggy local agent's burst of bad
// keys locks 127.0.0.1, yet the operator at the console (loopback, no
// forwarding header) gets in, slowed; through a proxy (X-Forwarded-For) the
// same guessable key stays refused; generated keys always pass.
func TestLockoutDoesNotLockOutTheOperator(t *testing.T) {
	e := newEdgeServer(t)
	const lo = "127.0.0.1:5000"
	for i := 0; i < auth.DefaultLockoutLimit; i++ {
		e.req("GET", "/v1/audit", lo, "", map[string]string{"X-API-Key": "buggy-agent-key"})
	}
	if rec := e.req("GET", "/v1/audit", lo, "", map[string]string{"X-API-Key": "buggy-agent-key"}); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("burst did not lock: %d", rec.Code)
	}
	if rec := e.req("GET", "/v1/audit", lo, "", nil); rec.Code != http.StatusTooManyRequests {
		t.Errorf("no credential while locked: %d", rec.Code)
	}
	e.now = e.now.Add(5 * time.Second)
	if rec := e.req("GET", "/v1/keys", lo, "", map[string]string{"X-API-Key": e.opKey, "X-Forwarded-For": "203.0.113.1"}); rec.Code != http.StatusTooManyRequests {
		t.Errorf("proxied guessable admin key while locked: %d", rec.Code)
	}
	if rec := e.req("GET", "/v1/keys", lo, "", map[string]string{"X-API-Key": e.opKey}); rec.Code != http.StatusOK {
		t.Errorf("operator at the console while locked: %d %s", rec.Code, rec.Body)
	}
	if rec := e.req("GET", "/v1/keys", lo, "", map[string]string{"X-API-Key": e.opKey + "-guess"}); rec.Code != http.StatusTooManyRequests {
		t.Errorf("second guess inside the probe interval: %d", rec.Code)
	}
	if rec := e.req("GET", "/v1/audit", lo, "", map[string]string{"X-API-Key": e.agentKey}); rec.Code != http.StatusOK {
		t.Errorf("generated agent key while locked: %d", rec.Code)
	}
	if rec := e.req("GET", "/v1/audit", "[::1]:5000", "", map[string]string{"X-API-Key": e.agentKey}); rec.Code != http.StatusOK {
		t.Errorf("::1: %d", rec.Code)
	}
}

// TestAuditAPIEscapes: GET /v1/audit answers the exact stored strings
// (JSON escaping is lossless), yet no raw control or bidirectional
// character reaches the bytes a terminal or browser shows.
func TestAuditAPIEscapes(t *testing.T) {
	e := newEdgeServer(t)
	cmd := "ls\x1b[2J\nfake\u202eexe\u2066"
	if _, err := e.s.audit.Append(context.Background(), audit.Entry{Action: "exec.run", Target: cmd, Verdict: audit.Allow,
		Detail: map[string]any{"k\u202e": "v\x1b"}}); err != nil {
		t.Fatal(err)
	}
	rec := e.req("GET", "/v1/audit?action=exec", "10.0.0.1:1", "", map[string]string{"Authorization": "Bearer " + e.opKey})
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, body)
	}
	if strings.ContainsAny(body, "\u202e\u2066\x1b") {
		t.Fatalf("raw control or bidi character in the API answer: %q", body)
	}
	var page struct {
		Data struct {
			Records []audit.Record `json:"records"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || len(page.Data.Records) != 1 {
		t.Fatalf("answer: %v %s", err, body)
	}
	if got := page.Data.Records[0]; got.Target != cmd || got.Detail["k\u202e"] != "v\x1b" {
		t.Errorf("the answer's strings are not the stored ones: %q %v", got.Target, got.Detail)
	}
	stored, err := e.s.audit.Query(context.Background(), audit.Filter{Action: "exec"})
	if err != nil || len(stored) != 1 || stored[0].Target != cmd {
		t.Fatalf("stored: %+v %v", stored, err)
	}
}
