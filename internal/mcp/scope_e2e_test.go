package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandhold/sandhold/internal/mcp"
)

// connectAt opens an MCP session at path (a /sandboxes/{id} base URL).
func (s *server) connectAt(path, apiKey string) (*sdk.ClientSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e-scoped", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.base + path,
		HTTPClient: &http.Client{Transport: bearer{key: apiKey, base: http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err == nil {
		s.t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// TestMCPAtASandboxURL: a client given a sandbox's base URL speaks MCP at
// /sandboxes/{id}/mcp and /sandboxes/{id}/v1/mcp, and its calls that name
// no sandbox act on that sandbox, not the key's default one; another
// key's sandbox there is refused like a missing one, before any session.
func TestMCPAtASandboxURL(t *testing.T) {
	s := startServer(t)
	alice, bob := s.newKey("alice", "agent"), s.newKey("bob", "agent")
	id := s.c.As(alice.Key).NewSandbox(map[string]any{"name": "scoped"})
	for i, path := range []string{"/sandboxes/" + id + "/mcp", "/sandboxes/" + id + "/v1/mcp"} {
		cs, err := s.connectAt(path, alice.Key)
		if err != nil {
			t.Fatalf("connect at %s: %v", path, err)
		}
		name := "/workspace/mark" + string(rune('0'+i))
		if out := bashOutput(t, cs, "touch "+name+" && hostname"); out == "" {
			t.Fatalf("%s: no output", path)
		}
		// exec_run with no id: the same sandbox.
		res, txt := callTool(t, cs, "exec_run", map[string]any{"command": "test -e " + name + " && echo here"})
		if res.IsError || !strings.Contains(txt, "here") {
			t.Fatalf("%s: exec_run without an id did not run in the sandbox of the URL: %s", path, txt)
		}
		res, txt = callTool(t, cs, mcp.AliasContext, map[string]any{})
		if res.IsError || !strings.Contains(txt, id) {
			t.Fatalf("%s: sandbox_get_context does not report the sandbox of the URL: %s", path, txt)
		}
	}
	// The key's default sandbox (at /mcp) has neither mark.
	cs, err := s.connect(alice.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := bashOutput(t, cs, "ls /workspace/mark0 /workspace/mark1 2>/dev/null | wc -l"); strings.TrimSpace(out) != "0" {
		t.Fatalf("the default sandbox sees the scoped sandbox's files: %q", out)
	}
	for _, who := range []struct{ name, key, id string }{{"bob on alice's sandbox", bob.Key, id}, {"a missing sandbox", alice.Key, "sb0000000000000000"}} {
		st := s.c.As(who.key).Do("POST", "/sandboxes/"+who.id+"/mcp", map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "initialize",
			"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "x", "version": "1"}},
		}, "Accept", "application/json, text/event-stream").Status
		if st != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", who.name, st)
		}
	}
}
