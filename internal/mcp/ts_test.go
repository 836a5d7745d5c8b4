package mcp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestTypeScriptSDKClient drives /mcp with the official TypeScript MCP SDK
// (test/mcp-ts: connect with a key and without, list tools,
// sandbox_execute_bash, a tool error, a custom tool appearing after
// tools/list_changed). `make test` installs it (npm ci --prefix test/mcp-ts).
func TestTypeScriptSDKClient(t *testing.T) {
	daemontest.RequireSandboxes(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript MCP SDK test needs Node.js 18+")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "test", "mcp-ts"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("the TypeScript MCP SDK is not installed: run `npm ci --prefix test/mcp-ts` (make deps does)")
	}
	s := startServer(t)
	agent := s.newKey("mcp-ts", "agent")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "mcp-e2e.mjs", s.base)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_TEST_KEY="+agent.Key)
	out, err := cmd.CombinedOutput()
	t.Logf("node mcp-e2e.mjs:\n%s", out)
	if err != nil || !strings.Contains(string(out), "\nPASS") {
		t.Fatalf("the TypeScript client failed: %v", err)
	}
	if !strings.Contains(string(out), "ok: custom tool") {
		t.Errorf("the custom-tool step did not run (the route exists on this server)")
	}
}
