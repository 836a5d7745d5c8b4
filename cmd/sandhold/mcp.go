package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/sandhold/sandhold/internal/client"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/mcp"
)

// mcpCmd is `sandhold mcp`: MCP over stdio for local MCP clients, bridged
// to a running server's /mcp, so calls pass the same dispatcher (policy,
// HALT, rate limits, audit) as every other client's.
type mcpCmd struct {
	Server string `name:"server" help:"Base URL of the server (default: the login's, SANDHOLD_URL, else http://127.0.0.1:8080)."`
}

// defaultMCPServer is where the bridge goes when nothing names a server.
const defaultMCPServer = "http://127.0.0.1:8080"

func (m *mcpCmd) Run(ctx context.Context, e *env) error {
	// Like every client command: the login file and SANDHOLD_*. The
	// server's SANDBOX_API_KEY is still read when nothing else names a key
	// (MCP client configs of earlier releases set it).
	cfg, err := client.LoadConfigPartial()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	server := m.Server
	if server == "" {
		server = cfg.URL
	}
	if server == "" {
		server = defaultMCPServer
	}
	key, from := cfg.Key, "the login's key"
	if os.Getenv(client.EnvKey) != "" {
		from = client.EnvKey
	}
	if key == "" {
		key, from = os.Getenv("SANDBOX_API_KEY"), "SANDBOX_API_KEY"
	}
	if key == "" {
		return &exitError{code: exitUsage, err: errors.New("no key for the server at " + server + ": run `sandhold login URL` (or set SANDHOLD_KEY)")}
	}
	// Protocol on stdout; diagnostics on stderr, redacted, warnings only.
	err = mcp.ServeStdio(ctx, mcp.BridgeOptions{
		Server: server, Key: key, KeyFrom: from, Version: version,
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
