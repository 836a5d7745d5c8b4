package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/redact"
	"github.com/sandhold/sandhold/internal/store"
)

// TestAccessLogCarriesTheRequestID: every request's access line names the
// request id the client got in X-Request-Id, as its first attribute (the
// request-scoped logger is built only when something else logs), and a
// key in the path is redacted.
func TestAccessLogCarriesTheRequestID(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	lg := audit.New(st, dir)
	svc := auth.NewService(st, lg)
	key := "test-admin-key-0123456789abcdefghijkl"
	if err := svc.EnsureAdmin(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	logger := slog.New(redact.NewHandler(slog.NewJSONHandler(&buf, nil)))
	cfg := config.Config{DataDir: dir, Listen: "127.0.0.1:0", MaxBody: 4096}.WithDefaults()
	s, err := New(Deps{Config: cfg, Auth: svc, Audit: lg, Logger: logger, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	useFoundation(s, dispatch.New(dispatch.Options{Audit: lg}))
	for _, path := range []string{"/healthz", "/v1/keys", "/v1/nothing/ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"} {
		buf.Reset()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		id := rec.Header().Get("X-Request-Id")
		var line string
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if strings.Contains(l, `"msg":"request"`) {
				line = l
			}
		}
		if id == "" || line == "" {
			t.Fatalf("%s: id %q, log %q", path, id, buf.String())
		}
		var rec2 map[string]any
		if err := json.Unmarshal([]byte(line), &rec2); err != nil {
			t.Fatal(err)
		}
		if rec2["request_id"] != id || rec2["status"] != float64(rec.Code) {
			t.Fatalf("%s: access line %s, answer %d %s", path, line, rec.Code, id)
		}
		if !strings.Contains(line, `"msg":"request","request_id":`) {
			t.Fatalf("%s: request_id is not the line's first attribute: %s", path, line)
		}
		if strings.Contains(line, "ghp_0123") {
			t.Fatalf("a token in the path reached the log: %s", line)
		}
	}
}

// TestAccessLogCountsASentFile: a download sent with sendfile (the
// connection's ReadFrom, reached past the middleware's wrappers) is
// counted in the access log's bytes; it was logged as 0.
func TestAccessLogCountsASentFile(t *testing.T) {
	content := bytes.Repeat([]byte("sandhold download\n"), 4096)
	f, err := os.CreateTemp(t.TempDir(), "dl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Error(err)
		}
		http.ServeContent(sendfileWriter{rec}, r, "", time.Time{}, f)
		got <- rec.bytes
	}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if !bytes.Equal(body, content) {
		t.Fatalf("the download sent %d bytes, want %d", len(body), len(content))
	}
	if n := <-got; n != int64(len(content)) {
		t.Fatalf("the access log counts %d bytes of a %d-byte download", n, len(content))
	}
}
