package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bridge bounds, with their reasons.
const (
	// maxBridgedTools caps the tools mirrored from the server: the server is
	// trusted, but a list is still not allowed to grow without end.
	maxBridgedTools = 4096
	// bridgeConnectTimeout bounds connecting to the server at start.
	bridgeConnectTimeout = 30 * time.Second
)

// BridgeOptions configures ServeStdio.
type BridgeOptions struct {
	// Server is the sandhold server's base URL (http://127.0.0.1:8080).
	Server string
	// Key is the API key sent in the Authorization header; KeyFrom says
	// where it came from, for messages ("SANDHOLD_KEY"; default "the key").
	Key     string
	KeyFrom string
	// Version is reported to the stdio client.
	Version string
	Logger  *slog.Logger
	// HTTPClient is the client for the server (default: one with no
	// overall timeout, since event streams are long-lived).
	HTTPClient *http.Client
}

// ServeStdio serves MCP on in/out (newline-delimited JSON-RPC) for a local
// MCP client, bridged to a running server's /mcp with the key: the same
// dispatcher, tools and policy as over HTTP. Tools mirror the server's and
// follow its tools/list_changed; every call is forwarded as is and its
// result (tool errors included) returned as is. It returns when the client
// closes in, ctx ends, or the server ends the session (key revoked).
func ServeStdio(ctx context.Context, o BridgeOptions, in io.ReadCloser, out io.WriteCloser) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if strings.TrimSpace(o.Key) == "" {
		return errors.New("no API key: run `sandhold login URL` or set SANDHOLD_KEY")
	}
	endpoint, err := mcpEndpoint(o.Server)
	if err != nil {
		return err
	}
	base := http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		base = o.HTTPClient.Transport
	}
	from := o.KeyFrom
	if from == "" {
		from = "the key"
	} else if from != "the key" && !strings.HasPrefix(from, "the ") {
		from = "the key in " + from
	}
	rt := &keyedTransport{key: o.Key, from: from, base: base}
	hc := &http.Client{Transport: rt}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	b := &bridge{log: o.Logger, changed: make(chan struct{}, 1)}
	client := sdk.NewClient(&sdk.Implementation{Name: "sandhold-mcp-bridge", Version: o.Version}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { b.kick() },
	})
	cctx, ccancel := context.WithTimeout(ctx, bridgeConnectTimeout)
	remote, err := client.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	ccancel()
	if err != nil {
		return rt.explain(o.Server, err)
	}
	defer func() { _ = remote.Close() }()
	b.remote = remote

	instr := ""
	if ir := remote.InitializeResult(); ir != nil {
		instr = ir.Instructions
	}
	b.local = sdk.NewServer(&sdk.Implementation{Name: "sandhold", Version: o.Version}, &sdk.ServerOptions{
		Instructions: instr,
		Logger:       o.Logger,
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
	})
	if err := b.mirror(ctx); err != nil {
		return rt.explain(o.Server, err)
	}
	go b.follow(ctx)
	serverGone := make(chan struct{})
	go func() {
		// The server ended the session (revoked key, shutdown): so does
		// the bridge, and the local client sees its stdio close.
		_ = remote.Wait()
		close(serverGone)
		cancel()
	}()
	err = b.local.Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
	select {
	case <-serverGone:
		return errors.New("the server closed the MCP session (key revoked, or the server stopped)")
	default:
	}
	return err
}

// mcpEndpoint turns a server base URL into its /mcp endpoint.
func mcpEndpoint(server string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(server))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--server %q: want a URL like http://127.0.0.1:8080", server)
	}
	if u.User != nil || u.RawQuery != "" {
		return "", fmt.Errorf("--server %q: no credentials or query in the URL (the key comes from sandhold login or SANDHOLD_KEY)", server)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/mcp"
	return u.String(), nil
}

// keyedTransport adds the key to every request (never the URL) and
// remembers the server's last refusal, to explain a failed connect.
type keyedTransport struct {
	key  string
	from string // where the key came from, for messages
	base http.RoundTripper

	// mu guards status.
	mu     sync.Mutex
	status int
}

func (k *keyedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	res, err := k.base.RoundTrip(r)
	if err == nil && res.StatusCode >= 400 {
		k.mu.Lock()
		k.status = res.StatusCode
		k.mu.Unlock()
	}
	return res, err
}

// explain says why connecting to server failed, in the operator's terms.
func (k *keyedTransport) explain(server string, err error) error {
	k.mu.Lock()
	status := k.status
	k.mu.Unlock()
	switch status {
	case http.StatusUnauthorized:
		return fmt.Errorf("the server at %s refused %s (401: unknown, revoked or malformed key)", server, k.from)
	case http.StatusForbidden:
		return fmt.Errorf("the server at %s refused the request (403): check that the key's role may use MCP and that the URL's host is one the server answers for", server)
	case http.StatusMisdirectedRequest:
		return fmt.Errorf("the server at %s does not answer for that host name (421); use the address it listens on", server)
	case http.StatusTooManyRequests:
		return fmt.Errorf("the server at %s refused the connection (429): too many failed logins from this address or too many MCP sessions for this key; retry later", server)
	case http.StatusNotFound:
		return fmt.Errorf("%s has no MCP endpoint at /mcp (404): is it a sandhold server?", server)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("cannot reach the sandhold server at %s (%w); is `sandhold serve` running there?", server, oe.Err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("cannot reach the sandhold server at %s (%w); is `sandhold serve` running there?", server, ne)
	}
	if status != 0 {
		return fmt.Errorf("connect to the sandhold server at %s: HTTP %d: %w", server, status, err)
	}
	return fmt.Errorf("connect to the sandhold server at %s: %w", server, err)
}

// bridge mirrors the server's tools on the local server.
type bridge struct {
	log     *slog.Logger
	remote  *sdk.ClientSession
	local   *sdk.Server
	changed chan struct{}

	// mu guards names (mirror runs from start and from follow).
	mu    sync.Mutex
	names map[string]bool
}

func (b *bridge) kick() {
	select {
	case b.changed <- struct{}{}:
	default: // a resync is already due
	}
}

// follow re-mirrors after each tools/list_changed from the server (not
// from inside the notification handler, which must not block the client).
func (b *bridge) follow(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.changed:
			if err := b.mirror(ctx); err != nil && ctx.Err() == nil {
				b.log.Warn("sandhold mcp: could not refresh the tool list", "err", err)
			}
		}
	}
}

// mirror makes the local tool list equal to the server's; the local
// server tells the client (tools/list_changed) when it changed.
func (b *bridge) mirror(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	for t, err := range b.remote.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the server's tools: %w", err)
		}
		if len(seen) >= maxBridgedTools {
			b.log.Warn("sandhold mcp: the server lists too many tools; the rest are left out", "limit", maxBridgedTools)
			break
		}
		if t == nil || seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		if m, ok := t.InputSchema.(map[string]any); !ok || m["type"] != "object" {
			t.InputSchema = map[string]any{"type": "object"} // the local server requires an object schema
		}
		name := t.Name
		b.local.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return b.remote.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args(req)})
		})
	}
	var gone []string
	for n := range b.names {
		if !seen[n] {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		b.local.RemoveTools(gone...)
	}
	b.names = seen
	return nil
}
