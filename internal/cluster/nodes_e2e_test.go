package cluster_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/store/pgtest"
	"github.com/sandhold/sandhold/internal/testenv"
)

type node struct {
	t    *testing.T
	d    *daemon.Daemon
	base string
}

func (n node) do(method, path, key string, body any) (int, json.RawMessage) {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.base+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, _ := io.ReadAll(res.Body)
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(raw, &env)
	return res.StatusCode, env.Data
}

func (n node) ok(method, path, key string, body any, want int, out any) {
	n.t.Helper()
	st, data := n.do(method, path, key, body)
	if st != want {
		n.t.Fatalf("%s %s = %d (%s), want %d", method, path, st, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			n.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// Two real daemons on one PostgreSQL: keys, HALT and the audit chain are
// shared; each node runs and lists only its own sandboxes.
func TestTwoDaemonsShareOneStore(t *testing.T) {
	daemontest.RequireSandboxes(t)
	url := pgtest.URL(t)
	admin := "shk_" + strings.Repeat("A", 43)
	start := func(name string) node {
		d := daemontest.Start(t, func(c *config.Config) {
			c.DatabaseURL, c.APIKey, c.NodeName, c.WarmPool = url, admin, name, 0
			c.MaxSandboxesPerKey = 1
		})
		return node{t: t, d: d, base: "http://" + d.Addr()}
	}
	a, b := start("node-a"), start("node-b")

	var key struct{ ID, Key string }
	a.ok("POST", "/v1/keys", admin, map[string]string{"name": "agent-1", "role": "agent"}, 201, &key)
	var sb struct{ ID string }
	b.ok("POST", "/v1/sandboxes", key.Key, map[string]any{}, 201, &sb)
	exec := "/v1/sandboxes/" + sb.ID + "/exec"
	b.ok("POST", exec, key.Key, map[string]any{"command": "echo hi"}, 200, nil)
	// The key's cap (1) counts its sandbox on b when it creates through a.
	if st, data := a.do("POST", "/v1/sandboxes", key.Key, map[string]any{}); st != http.StatusTooManyRequests {
		t.Fatalf("second sandbox of a capped key, through another node = %d %s", st, data)
	}
	// Node a neither lists nor adopted node b's sandbox.
	var list []struct{ ID string }
	a.ok("GET", "/v1/sandboxes", admin, nil, 200, &list)
	for _, s := range list {
		if s.ID == sb.ID {
			t.Fatalf("node a lists node b's sandbox %s", sb.ID)
		}
	}

	// HALT through a: b refuses and its sandbox is frozen.
	t0 := time.Now()
	a.ok("POST", "/v1/control/halt", admin, map[string]any{"reason": "incident"}, 200, nil)
	testenv.Eventually(t, "HALT on b", func() bool {
		var info struct{ State string }
		b.ok("GET", "/v1/sandboxes/"+sb.ID, key.Key, nil, 200, &info)
		return info.State == "paused"
	})
	d := time.Since(t0)
	t.Logf("HALT through node a froze node b's sandbox after %v", d)
	if st, _ := b.do("POST", exec, key.Key, map[string]any{"command": "echo hi"}); st != http.StatusConflict {
		t.Fatalf("exec on b under a HALT from a = %d", st)
	}
	b.ok("POST", "/v1/control/unhalt", admin, nil, 200, nil)
	testenv.Eventually(t, "unhalt", func() bool { st, _ := b.do("POST", exec, key.Key, map[string]any{"command": "true"}); return st == 200 })

	// Revoke through b: a refuses the key at once.
	b.ok("DELETE", "/v1/keys/"+key.ID, admin, nil, 200, nil)
	if st, _ := a.do("GET", "/v1/sandboxes", key.Key, nil); st != http.StatusUnauthorized {
		t.Fatalf("node a after a revocation on b = %d, want 401", st)
	}

	// One audit chain, verified from both nodes.
	for name, n := range map[string]node{"a": a, "b": b} {
		var res struct {
			OK      bool  `json:"ok"`
			Records int64 `json:"records"`
		}
		n.ok("GET", "/v1/audit/verify", admin, nil, 200, &res)
		if !res.OK || res.Records < 10 {
			t.Fatalf("audit verify on %s: %+v", name, res)
		}
	}
}
