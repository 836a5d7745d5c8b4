package shell_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/testenv"
)

type srv struct {
	t    *testing.T
	d    *daemon.Daemon
	base string
	key  string
}

// startServer runs the real daemon on 127.0.0.1:0 with a fresh data dir.
func startServer(t *testing.T, mutate func(*config.Config)) *srv {
	t.Helper()
	testenv.RequireSandboxes(t, "/bin/bash")
	d := daemontest.Start(t, mutate)
	return &srv{t: t, d: d, base: "http://" + d.Addr(), key: d.AdminKey()}
}

// resp is a decoded answer.
type resp struct {
	status int
	body   map[string]any
	raw    []byte
}

func (r resp) data() map[string]any {
	m, _ := r.body["data"].(map[string]any)
	return m
}

// call sends a JSON request with key and decodes the JSON answer.
func (s *srv) call(key, method, path string, body any) resp {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			buf, _ := json.Marshal(b)
			rd = bytes.NewReader(buf)
		}
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, raw: raw}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		s.t.Fatalf("%s %s: %d, not JSON: %q", method, path, res.StatusCode, raw)
	}
	return out
}

func (s *srv) do(method, path string, body any) resp { return s.call(s.key, method, path, body) }

// ok fails unless r is a 200 success envelope and returns its data.
func ok(t *testing.T, r resp) map[string]any {
	t.Helper()
	if r.status != 200 || r.body["success"] != true {
		t.Fatalf("want 200 success, got %d %s", r.status, r.raw)
	}
	return r.data()
}

// toolFailed fails unless r is AIO's answer to a tool-level failure: HTTP
// 200, success false, and data null (AIO's schemas allow only the result
// or null there).
func toolFailed(t *testing.T, what string, r resp) {
	t.Helper()
	if d, present := r.body["data"]; r.status != 200 || r.body["success"] != false || !present || d != nil {
		t.Fatalf("%s: %d %s, want 200 with success:false and data null", what, r.status, r.raw)
	}
}

// newKey creates a key with role and returns it.
func (s *srv) newKey(name, role string) string {
	s.t.Helper()
	r := s.do("POST", "/v1/keys", map[string]string{"name": name, "role": role})
	if r.status != 201 {
		s.t.Fatalf("create key: %d %s", r.status, r.raw)
	}
	return r.data()["key"].(string)
}
