package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/mcp"
)

// mcpCmd is `sandhold mcp`: MCP over stdio for local MCP clients, bridged
// to a running server's /mcp, so calls pass the same dispatcher (policy,
// HALT, rate limits, audit) as every other client's.
type mcpCmd struct {
	Server string `name:"server" default:"http://127.0.0.1:8080" help:"Base URL of the running sandhold server."`
}

func (m *mcpCmd) Run(ctx context.Context, e *env) error {
	key := os.Getenv("SANDBOX_API_KEY")
	if key == "" {
		return &exitError{code: 2, err: fmt.Errorf("SANDBOX_API_KEY is not set: sandhold mcp needs a key of the server at %s", m.Server)}
	}
	// Protocol on stdout; diagnostics on stderr, redacted, warnings only.
	err := mcp.ServeStdio(ctx, mcp.BridgeOptions{
		Server: m.Server, Key: key, Version: version,
		Logger: daemon.NewLogger(e.stderr, "warn"),
	}, os.Stdin, nopCloser{e.stdout})
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// nopCloser lets the bridge close its output without closing the
// process's stdout.
type nopCloser struct {
	w interface{ Write([]byte) (int, error) }
}

func (n nopCloser) Write(p []byte) (int, error) { return n.w.Write(p) }
func (nopCloser) Close() error                  { return nil }
