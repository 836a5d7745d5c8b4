package aiocompat_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
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
	if os.Geteuid() != 0 {
		t.Skip("needs root to create sandboxes (user namespaces with id maps, cgroups)")
	}
	cfg := config.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DisableRateLimit: true}
	d, err := daemon.New(cfg, daemon.WithLogger(daemon.NewLogger(io.Discard, "error")), daemon.WithStderr(io.Discard), daemon.WithVersion("test"))
	if err != nil {
		t.Fatalf("new daemon: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	s := &server{t: t, base: "http://" + d.Addr(), key: d.AdminKey(), routes: map[string]bool{}}
	err = chi.Walk(d.API().Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
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
