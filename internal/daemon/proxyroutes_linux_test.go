package daemon

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestProxyRoutingSurvivesRestart: an upstream set over AIO's proxy route
// is kept (0600, in the data dir) and in force after a restart: the
// sandbox's curl still goes through it with its credentials, and the
// answer still masks the password.
func TestProxyRoutingSurvivesRestart(t *testing.T) {
	testenv.RequireSandboxes(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var mu sync.Mutex
	var seen []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				mu.Lock()
				seen = append(seen, req.RequestURI+" "+req.Header.Get("Proxy-Authorization"))
				mu.Unlock()
				_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nvia-upstream")
			}()
		}
	}()
	up := ln.Addr().(*net.TCPAddr).Port
	const password = "restart-pw-31"
	cfg := func(c *config.Config) { c.WarmPool = 0; c.DisableRateLimit = true }

	s := start(t, dir, cfg)
	id := s.createSandbox(s.d.AdminKey(), map[string]any{"network": map[string]any{"mode": "proxy",
		"allow": []string{fmt.Sprintf("localhost:%d", up), "localhost:1"}}})
	expectOK(t, s.do("PUT", "/sandboxes/"+id+"/v1/proxy/upstream", s.d.AdminKey(),
		map[string]any{"server": fmt.Sprintf("agent:%s@localhost:%d", password, up)}, nil), 200, nil)
	s.stop()

	fi, err := os.Stat(filepath.Join(dir, "egress", id+".json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("routing state: %v %v, want a 0600 file", fi, err)
	}

	s2 := start(t, dir, cfg)
	r := s2.do("GET", "/sandboxes/"+id+"/v1/proxy/upstream", s2.d.AdminKey(), nil, nil)
	var info struct {
		Addr     string `json:"addr"`
		Password string `json:"password"`
	}
	expectOK(t, r, 200, &info)
	if info.Addr != fmt.Sprintf("localhost:%d", up) || info.Password != "********" || strings.Contains(string(r.raw), password) {
		t.Fatalf("upstream after a restart: %s", r.raw)
	}
	res := s2.exec(s2.d.AdminKey(), id, "curl -sS -x http://127.0.0.1:3128 --noproxy '' http://localhost:1/after-restart")
	mu.Lock()
	defer mu.Unlock()
	if res.Stdout != "via-upstream" || len(seen) != 1 || !strings.HasPrefix(seen[0], "http://localhost:1/after-restart Basic ") {
		t.Fatalf("after a restart: %+v, upstream saw %v", res, seen)
	}
}
