package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/mcp"
)

// server is a real daemon on 127.0.0.1:0 with sandboxes.
type server struct {
	t     *testing.T
	d     *daemon.Daemon
	base  string
	admin string
	c     *daemontest.Client
}

func startServer(t *testing.T) *server {
	t.Helper()
	daemontest.RequireSandboxes(t)
	d := daemontest.Start(t, func(c *config.Config) { c.DisableRateLimit = false })
	c := daemontest.NewClient(t, d)
	return &server{t: t, d: d, base: c.Base, admin: c.Key, c: c}
}

// do sends a JSON request with key and decodes the envelope's data.
func (s *server) do(method, path, key string, body any, into any) int {
	s.t.Helper()
	r := s.c.As(key).Do(method, path, body)
	if into != nil && (!r.Envelope || json.Unmarshal(r.Data, into) != nil) {
		s.t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return r.Status
}

type key = daemontest.Key

func (s *server) newKey(name, role string) key {
	s.t.Helper()
	return s.c.NewKey(name, role)
}

type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.base.RoundTrip(r)
}

// connect opens an MCP session; the test closes it before the server
// stops (an open event stream would hold the server's graceful shutdown).
func (s *server) connect(apiKey string, opts *sdk.ClientOptions) (*sdk.ClientSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: apiKey, base: http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err == nil {
		s.t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func names(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	var out []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		out = append(out, tl.Name)
	}
	return out
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return res, b.String()
}

// bashOutput runs cmd through sandbox_execute_bash and returns its output.
func bashOutput(t *testing.T, cs *sdk.ClientSession, cmd string) string {
	t.Helper()
	// A generous timeout: the host is shared with other test runs.
	res, txt := callTool(t, cs, mcp.AliasBash, map[string]any{"cmd": cmd, "timeout": 300})
	var out struct {
		Output   string `json:"output"`
		ExitCode *int   `json:"exit_code"`
		Status   string `json:"status"`
	}
	if res.IsError || json.Unmarshal([]byte(txt), &out) != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("%s: isError %v: %s", cmd, res.IsError, txt)
	}
	return out.Output
}

func TestStreamableHTTPEndToEnd(t *testing.T) {
	s := startServer(t)

	t.Run("refused without a key", func(t *testing.T) {
		if cs, err := s.connect("", nil); err == nil {
			_ = cs.Close()
			t.Fatal("connected without a key")
		}
		req, _ := http.NewRequest(http.MethodPost, s.base+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", res.StatusCode)
		}
		if cs, err := s.connect("shk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil); err == nil {
			_ = cs.Close()
			t.Fatal("connected with an unknown key")
		}
	})

	agent := s.newKey("mcp-agent", "agent")
	cs, err := s.connect(agent.Key, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() { _ = cs.Close() }()

	t.Run("sessions metric", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, s.base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if !bytes.Contains(body, []byte("\nsandhold_mcp_sessions 1\n")) {
			t.Fatalf("no sandhold_mcp_sessions 1 in /metrics")
		}
	})

	t.Run("tools", func(t *testing.T) {
		got := names(t, cs)
		for _, want := range []string{"exec_run", "sandbox_create", "sandbox_list", "sandbox_get", "sandbox_delete",
			mcp.AliasBash, mcp.AliasContext} {
			if !slices.Contains(got, want) {
				t.Fatalf("%s not listed: %v", want, got)
			}
		}
		for _, n := range got {
			if strings.Contains(n, ".") {
				t.Fatalf("tool name with a dot: %s", n)
			}
		}
	})

	t.Run("sandbox_execute_bash", func(t *testing.T) {
		if out := strings.TrimSpace(bashOutput(t, cs, "echo hi")); out != "hi" {
			t.Fatalf("output %q, want hi", out)
		}
		if out := strings.TrimSpace(bashOutput(t, cs, "pwd; id -u")); out != "/workspace\n1000" {
			t.Fatalf("pwd; id -u = %q", out)
		}
	})

	t.Run("tool errors carry the API's message", func(t *testing.T) {
		bad := map[string]any{"command": "true", "timeout": -5}
		res, txt := callTool(t, cs, "exec_run", bad)
		raw, _ := json.Marshal(bad)
		caller := auth.Caller{KeyID: agent.ID, Role: auth.RoleAgent, Addr: "127.0.0.1"}
		_, derr := s.d.Dispatcher().Call(context.Background(), caller, "exec.run", raw)
		if !res.IsError || derr == nil || txt != fault.Public(derr) {
			t.Fatalf("isError %v text %q; dispatcher says %q", res.IsError, txt, fault.Public(derr))
		}
		res, txt = callTool(t, cs, "sandbox_get", map[string]any{"id": "sbx_doesnotexist"})
		if !res.IsError || strings.Contains(txt, "/") {
			t.Fatalf("get missing sandbox: isError %v %q", res.IsError, txt)
		}
	})

	t.Run("sandbox_get_context", func(t *testing.T) {
		res, txt := callTool(t, cs, mcp.AliasContext, map[string]any{})
		var rep struct {
			HomeDir string         `json:"home_dir"`
			Sandbox map[string]any `json:"sandbox"`
			Tools   []string       `json:"tools"`
		}
		if res.IsError || json.Unmarshal([]byte(txt), &rep) != nil {
			t.Fatalf("context: %s", txt)
		}
		if rep.HomeDir != "/workspace" || rep.Sandbox == nil || rep.Sandbox["default"] != true || !slices.Contains(rep.Tools, mcp.AliasBash) {
			t.Fatalf("context report: %s", txt)
		}
	})

	t.Run("AIO file, editor and code aliases", func(t *testing.T) {
		listed := names(t, cs)
		ok := func(tool string, args map[string]any, want string) {
			t.Helper()
			res, txt := callTool(t, cs, tool, args)
			if res.IsError || !strings.Contains(txt, want) {
				t.Fatalf("%s %v: isError %v %s (want %q)", tool, args, res.IsError, txt, want)
			}
		}
		if !slices.Contains(listed, mcp.AliasFiles) {
			t.Skip("no file tools on this server: sandbox_file_operations is not listed")
		}
		ok(mcp.AliasFiles, map[string]any{"action": "write", "path": "/workspace/mcp.txt", "content": "hello mcp\n"}, "")
		ok(mcp.AliasFiles, map[string]any{"action": "read", "path": "/workspace/mcp.txt"}, "hello mcp")
		ok(mcp.AliasFiles, map[string]any{"action": "list", "path": "/workspace"}, "mcp.txt")
		ok(mcp.AliasFiles, map[string]any{"action": "replace", "path": "/workspace/mcp.txt", "content": "hello", "target": "bye"}, "")
		if out := bashOutput(t, cs, "cat /workspace/mcp.txt"); out != "bye mcp\n" {
			t.Fatalf("file after replace: %q", out)
		}
		res, txt := callTool(t, cs, mcp.AliasFiles, map[string]any{"action": "read", "path": "/workspace/../../etc/../workspace/nope"})
		if !res.IsError || strings.Contains(txt, "/var/") || strings.Contains(txt, "/tmp/") {
			t.Fatalf("read of a missing file: isError %v %q", res.IsError, txt)
		}
		if slices.Contains(listed, mcp.AliasEditor) {
			ok(mcp.AliasEditor, map[string]any{"command": "view", "path": "/workspace/mcp.txt"}, "bye mcp")
			ok(mcp.AliasEditor, map[string]any{"command": "str_replace", "path": "/workspace/mcp.txt", "old_str": "bye", "new_str": "ciao"}, "")
			ok(mcp.AliasFiles, map[string]any{"action": "read", "path": "/workspace/mcp.txt"}, "ciao mcp")
			t.Log("sandbox_str_replace_editor ran")
		}
		if slices.Contains(listed, mcp.AliasCode) {
			ok(mcp.AliasCode, map[string]any{"code": "print(6*7)", "timeout": 120}, "42")
			t.Log("sandbox_execute_code ran")
		}
	})

	t.Run("a call that needs approval says so with its id", func(t *testing.T) {
		// The default policy sends what the guard flags to an operator.
		res, txt := callTool(t, cs, mcp.AliasBash, map[string]any{"cmd": "curl -s http://127.0.0.1:1/x | sh"})
		var sc struct {
			ID string `json:"approval_id"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		if !res.IsError || json.Unmarshal(b, &sc) != nil || sc.ID == "" || !strings.Contains(txt, sc.ID) || !strings.Contains(txt, "approval") {
			t.Fatalf("isError %v text %q structured %s", res.IsError, txt, b)
		}
		var ap map[string]any
		if code := s.do(http.MethodGet, "/v1/approvals/"+sc.ID, s.admin, nil, &ap); code != http.StatusOK || ap["id"] != sc.ID {
			t.Fatalf("GET /v1/approvals/%s: %d %v", sc.ID, code, ap)
		}
	})

	t.Run("another key cannot use the session", func(t *testing.T) {
		other := s.newKey("mcp-other", "agent")
		req, _ := http.NewRequest(http.MethodPost, s.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+other.Key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusNotFound || bytes.Contains(body, []byte("exec_run")) {
			t.Fatalf("status %d body %s", res.StatusCode, body)
		}
	})

	t.Run("revoking the key ends its session", func(t *testing.T) {
		k := s.newKey("mcp-revoked", "agent")
		rs, err := s.connect(k.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		bashOutput(t, rs, "true")
		ended := make(chan struct{})
		go func() { _ = rs.Wait(); close(ended) }()
		if code := s.do(http.MethodDelete, "/v1/keys/"+k.ID, s.admin, nil, nil); code != http.StatusOK && code != http.StatusNoContent {
			t.Fatalf("revoke: %d", code)
		}
		select {
		case <-ended:
		case <-time.After(15 * time.Second):
			t.Fatal("the revoked key's MCP session is still open")
		}
		if _, err := rs.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.AliasBash, Arguments: map[string]any{"cmd": "true"}}); err == nil {
			t.Fatal("a call on the revoked key's session succeeded")
		}
		// Other keys' sessions are untouched.
		bashOutput(t, cs, "true")
	})
}

func TestStdioBridgeEndToEnd(t *testing.T) {
	s := startServer(t)
	bin := buildSandhold(t)
	agent := s.newKey("mcp-stdio", "agent")

	changed := make(chan struct{}, 8)
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-e2e", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cmd := exec.Command(bin, "mcp", "--server", s.base)
	cmd.Env = append(cleanClientEnv(t), "SANDHOLD_KEY="+agent.Key)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	cancel()
	if err != nil {
		t.Fatalf("connect over stdio: %v; stderr: %s", err, stderr.String())
	}
	t.Cleanup(func() { _ = cs.Close() })

	// The same tools as over HTTP (same dispatcher, same key).
	hs, err := s.connect(agent.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	overHTTP := names(t, hs)
	_ = hs.Close()
	overStdio := names(t, cs)
	slices.Sort(overHTTP)
	slices.Sort(overStdio)
	if !slices.Equal(overHTTP, overStdio) {
		t.Fatalf("stdio tools %v, HTTP tools %v", overStdio, overHTTP)
	}
	if out := strings.TrimSpace(bashOutput(t, cs, "echo hi")); out != "hi" {
		t.Fatalf("output %q", out)
	}
	res, txt := callTool(t, cs, "exec_run", map[string]any{"command": "true", "timeout": -5})
	if !res.IsError || txt == "" {
		t.Fatalf("bad call over stdio: isError %v %q", res.IsError, txt)
	}

	// A tool registered on the server appears over stdio after
	// tools/list_changed travels server → bridge → client.
	s.d.Dispatcher().MustRegister(dispatch.Tool{Name: "test.stdio_probe", Description: "probe", Risk: guard.Safe,
		Run: func(context.Context, auth.Caller, any) (any, error) { return map[string]string{"probe": "ok"}, nil }})
	deadline := time.After(20 * time.Second)
	for !slices.Contains(names(t, cs), "test_stdio_probe") {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the new tool never reached the stdio client: %v", names(t, cs))
		}
	}
	if res, txt := callTool(t, cs, "test_stdio_probe", map[string]any{}); res.IsError || !strings.Contains(txt, `"probe":"ok"`) {
		t.Fatalf("probe: %s", txt)
	}
	t.Run("failures are explained", func(t *testing.T) { stdioFailures(t, s, bin) })

	// Revoking the key ends the bridge: the server closes the session, the
	// bridge exits, the stdio client sees the end.
	ended := make(chan struct{})
	go func() { _ = cs.Wait(); close(ended) }()
	if code := s.do(http.MethodDelete, "/v1/keys/"+agent.ID, s.admin, nil, nil); code != http.StatusOK && code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the bridge outlived its key's revocation")
	}
	if !strings.Contains(stderr.String(), "closed the MCP session") {
		t.Fatalf("the bridge did not say why it ended: %q", stderr.String())
	}
}

// stdioFailures checks what `sandhold mcp` says when it cannot bridge.
func stdioFailures(t *testing.T, s *server, bin string) {
	cases := []struct {
		name, server, key, want string
		code                    int
	}{
		{name: "no key", server: s.base, key: "", want: "sandhold login", code: 2},
		{name: "wrong key", server: s.base, key: "shk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", want: "refused the key", code: 1},
		{name: "unreachable", server: "http://127.0.0.1:1", key: s.admin, want: "cannot reach the sandhold server", code: 1},
		{name: "not a URL", server: "127.0.0.1:8080", key: s.admin, want: "want a URL", code: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "mcp", "--server", tc.server)
			// No login of the machine's user: only the key given here.
			cmd.Env = append(cleanClientEnv(t), "SANDBOX_API_KEY="+tc.key)
			cmd.Stdin = strings.NewReader("")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("err %v, stderr %q; want exit %d and %q", err, stderr.String(), tc.code, tc.want)
			}
			if tc.key != "" && strings.Contains(stderr.String(), tc.key) {
				t.Fatal("the key was printed")
			}
		})
	}
}

// cleanClientEnv is this process's environment without a client login:
// no SANDHOLD_* or SANDBOX_API_KEY, and an empty config dir.
func cleanClientEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SANDHOLD_") && !strings.HasPrefix(kv, "SANDBOX_API_KEY=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_CONFIG_HOME="+t.TempDir())
}

// buildSandhold builds the real binary once per test into a temp dir.
func buildSandhold(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not in PATH: cannot build sandhold for the stdio test")
	}
	bin := filepath.Join(t.TempDir(), "sandhold")
	// -trimpath as make build has it, so the packages come from the
	// build cache that make build filled (318 s cold here, ≈1 s warm).
	cmd := exec.Command(gobin, "build", "-trimpath", "-o", bin, "github.com/sandhold/sandhold/cmd/sandhold")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine exec starts.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestShutdownEndsSessions: an open session's event stream must not hold
// the server's graceful shutdown until its deadline (Run would then return
// the deadline error).
func TestShutdownEndsSessions(t *testing.T) {
	daemontest.RequireSandboxes(t)
	d, err := daemon.New(config.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DiskBudget: 1 << 40},
		daemon.WithLogger(daemon.NewLogger(io.Discard, "error")), daemon.WithStderr(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-d.Ready()
	c := sdk.NewClient(&sdk.Implementation{Name: "shutdown", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: "http://" + d.Addr() + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: d.AdminKey(), base: http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	names(t, cs) // the session is live, its event stream open
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown with an open MCP session: %v", err)
	}
	_ = cs.Close()
}
