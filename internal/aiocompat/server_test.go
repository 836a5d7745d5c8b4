package aiocompat_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

type server struct {
	t      *testing.T
	base   string
	key    string
	routes map[string]bool // "METHOD pattern" of every registered route
	c      *daemontest.Client
}

// startServer runs the real daemon on 127.0.0.1:0 with a fresh data dir;
// it skips (with the reason) where sandboxes cannot run.
func startServer(t *testing.T, mutate ...func(*config.Config)) *server {
	t.Helper()
	d := daemontest.Start(t, func(c *config.Config) {
		for _, m := range mutate {
			m(c)
		}
	})
	c := daemontest.NewClient(t, d)
	c.HTTP = &http.Client{Timeout: 2 * time.Minute}
	s := &server{t: t, base: c.Base, key: c.Key, routes: map[string]bool{}, c: c}
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
	var hdr []string
	if contentType != "" {
		hdr = []string{"Content-Type", contentType}
	}
	r := s.c.Do(method, path, bytes.NewReader(body), hdr...)
	return r.Status, r.Header.Get("Content-Type"), r.Raw
}
