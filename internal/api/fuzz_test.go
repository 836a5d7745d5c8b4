package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/store"
)

func newTestServer(tb testing.TB) (*Server, string) {
	tb.Helper()
	return newTestServerWith(tb, 4096)
}

func newTestServerWith(tb testing.TB, maxBody config.Size) (*Server, string) {
	tb.Helper()
	dir := tb.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	lg := audit.New(st, dir)
	svc := auth.NewService(st, lg, auth.WithLockout(1<<30, 1))
	key := "test-admin-key-0123456789abcdefghijkl"
	if err := svc.EnsureAdmin(context.Background(), key); err != nil {
		tb.Fatal(err)
	}
	cfg := config.Config{DataDir: dir, Listen: "127.0.0.1:0", MaxBody: maxBody}.WithDefaults()
	s, err := New(Deps{Config: cfg, Auth: svc, Audit: lg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
	if err != nil {
		tb.Fatal(err)
	}
	useFoundation(s, dispatch.New(dispatch.Options{Audit: lg}))
	return s, key
}

// FuzzCreateKeyBody feeds arbitrary bodies and content types to a JSON
// route through the whole middleware chain: the answer is always an
// envelope and never a 5xx.
func FuzzCreateKeyBody(f *testing.F) {
	s, key := newTestServer(f)
	f.Add([]byte(`{"name":"a","role":"agent"}`), "application/json")
	f.Add([]byte(`{"name":"a","role":"root"}`), "application/json")
	f.Add([]byte(`{"name":`), "application/json")
	f.Add([]byte("\xff\xfe"), "text/plain")
	f.Add([]byte(`[1,2,3]`), "")
	f.Fuzz(func(t *testing.T, body []byte, ctype string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/keys", bytes.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+key)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q (%q): %s", rec.Code, body, ctype, rec.Body)
		}
		var env struct {
			Success *bool           `json:"success"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Success == nil {
			t.Fatalf("not an envelope (%d): %s", rec.Code, rec.Body)
		}
		if *env.Success != (rec.Code == http.StatusCreated) {
			t.Fatalf("success=%v with status %d", *env.Success, rec.Code)
		}
	})
}

// FuzzCredentialHeaders sends arbitrary credential header values: never 5xx.
func FuzzCredentialHeaders(f *testing.F) {
	s, _ := newTestServer(f)
	f.Add("Bearer shk_x", "", "")
	f.Add("", "\xff", "api_key=1")
	f.Fuzz(func(t *testing.T, authz, xkey, rawQuery string) {
		req := httptest.NewRequest(http.MethodGet, "/v1/audit", nil)
		req.Host = "127.0.0.1"
		req.URL.RawQuery = rawQuery
		req.Header["Authorization"] = []string{authz}
		req.Header["X-Api-Key"] = []string{xkey}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
