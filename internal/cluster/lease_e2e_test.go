package cluster_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// TestSameNodeNameIsRefused: a second server started on one PostgreSQL
// under a live node's name (as two hosts with the default
// SANDBOX_NODE_NAME, the host name, would) refuses to start, saying who
// holds the name and what to change, and never touches that node's
// sandboxes (before the lease it listed them as stopped and an exec
// through it started a second copy). A second server on a node's data dir
// is refused too.
func TestSameNodeNameIsRefused(t *testing.T) {
	daemontest.RequireSandboxes(t)
	url := pgtest.URL(t)
	admin := "shk_" + strings.Repeat("L", 43)
	var dirA string
	d := daemontest.Start(t, func(c *config.Config) {
		c.DatabaseURL, c.APIKey, c.NodeName, c.WarmPool = url, admin, "same-host", 0
		dirA = c.DataDir
	})
	a := node{t: t, d: d, base: "http://" + d.Addr()}
	var sb struct{ ID string }
	a.ok("POST", "/v1/sandboxes", admin, map[string]any{}, 201, &sb)
	a.ok("POST", "/v1/sandboxes/"+sb.ID+"/exec", admin, map[string]any{"command": "echo running > /workspace/mark"}, 200, nil)

	for _, c := range []struct {
		name, dataDir, want string
	}{
		{"the same name, another data dir", t.TempDir(), "SANDBOX_NODE_NAME"},
		{"the same data dir", dirA, "SANDBOX_DATA_DIR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Config{Listen: "127.0.0.1:0", DataDir: c.dataDir, DatabaseURL: url, APIKey: admin, NodeName: "same-host",
				WarmPool: 0, DisableRateLimit: true, DiskBudget: 1 << 40}
			b, err := daemon.New(cfg, daemon.WithLogger(daemon.NewLogger(io.Discard, "error")), daemon.WithStderr(io.Discard))
			if err == nil {
				_ = b.Close()
				t.Fatal("a second server under a live node's name started")
			}
			if !errors.Is(err, store.ErrNodeHeld) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "refusing to start") {
				t.Fatalf("refusal: %v, want ErrNodeHeld saying to change %s", err, c.want)
			}
		})
	}
	// The first node's sandbox still runs there, untouched.
	var info struct{ State string }
	a.ok("GET", "/v1/sandboxes/"+sb.ID, admin, nil, 200, &info)
	if info.State != "running" {
		t.Fatalf("the live node's sandbox is %s after the refused start, want running", info.State)
	}
	a.ok("POST", "/v1/sandboxes/"+sb.ID+"/exec", admin, map[string]any{"command": "cat /workspace/mark"}, 200, nil)
}
