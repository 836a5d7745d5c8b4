package aiocompat_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

type server struct {
	t      *testing.T
	base   string
	key    string
	routes map[string]bool // "METHOD pattern" of every registered route
}

// startServer runs the real daemon on 127.0.0.1:0 with a fresh data dir;
// it skips (with the reason) where sandboxes cannot run.
func startServer(t *testing.T) *server {
	t.Helper()
	d := daemontest.Start(t, nil)
	s := &server{t: t, base: "http://" + d.Addr(), key: d.AdminKey(), routes: map[string]bool{}}
	err := chi.Walk(d.API().Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		s.routes[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatalf("walk routes: %v", err)
	}
	return s
}

// call sends one request and returns the status, content type and body.
func (s *server) call(method, path, contentType string, body []byte) (int, string, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, resp.Header.Get("Content-Type"), out
}
