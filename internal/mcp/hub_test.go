package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/coderun"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/testenv"
)

var testCallers = map[string]auth.Caller{
	"k-agent":  {KeyID: "k-agent", Role: auth.RoleAgent, Addr: "127.0.0.1"},
	"k-agent2": {KeyID: "k-agent2", Role: auth.RoleAgent, Addr: "127.0.0.1"},
	"k-viewer": {KeyID: "k-viewer", Role: auth.RoleViewer, Addr: "127.0.0.1"},
}

// fakeAuth stands in for the API's auth middleware: "Bearer <key id>".
func fakeAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := testCallers[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithCaller(r.Context(), c)))
	})
}

type rig struct {
	t   *testing.T
	d   *dispatch.Dispatcher
	hub *Hub
	url string
}

func newRig(t *testing.T, do dispatch.Options, o Options) *rig {
	t.Helper()
	d := dispatch.New(do)
	o.Dispatcher = d
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Version = "test"
	h := New(o)
	srv := httptest.NewServer(fakeAuth(h))
	t.Cleanup(func() { h.Close(); srv.Close() })
	return &rig{t: t, d: d, hub: h, url: srv.URL}
}

type keyTransport struct {
	key  string
	base http.RoundTripper
}

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.base.RoundTrip(r)
}

func (r *rig) connect(key string, opts *sdk.ClientOptions) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: r.url,
		HTTPClient: &http.Client{Transport: keyTransport{key: key, base: http.DefaultTransport}}, MaxRetries: -1}, nil)
}

func (r *rig) mustConnect(key string, opts *sdk.ClientOptions) *sdk.ClientSession {
	r.t.Helper()
	cs, err := r.connect(key, opts)
	if err != nil {
		r.t.Fatalf("connect %s: %v", key, err)
	}
	r.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// recorder is a tool that records its raw arguments.
type recorder struct {
	mu   sync.Mutex
	args []json.RawMessage
}

func (rc *recorder) tool(name, schema string, result any, roles ...auth.Role) dispatch.Tool {
	return dispatch.Tool{Name: name, Description: "test " + name, Risk: guard.Safe, Roles: roles,
		InputSchema: json.RawMessage(schema),
		Run: func(_ context.Context, _ auth.Caller, a any) (any, error) {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rc.args = append(rc.args, a.(json.RawMessage))
			return result, nil
		}}
}

func (rc *recorder) last(t *testing.T) map[string]any {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.args) == 0 {
		t.Fatal("the tool was not called")
	}
	var m map[string]any
	if err := json.Unmarshal(rc.args[len(rc.args)-1], &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNameTable(t *testing.T) {
	mk := func(names ...string) []*dispatch.Tool {
		var out []*dispatch.Tool
		for _, n := range names {
			out = append(out, &dispatch.Tool{Name: n})
		}
		slices.SortFunc(out, func(a, b *dispatch.Tool) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	cases := []struct {
		name     string
		tools    []string
		reserved []string
		want     map[string]string // MCP name → dispatcher name
		skipped  []string
	}{
		{name: "dots become underscores", tools: []string{"exec.run", "sandbox.create", "plain"},
			want: map[string]string{"exec_run": "exec.run", "sandbox_create": "sandbox.create", "plain": "plain"}},
		{name: "collision: first in name order wins", tools: []string{"a_b.c", "a.b_c"},
			want: map[string]string{"a_b_c": "a.b_c"}, skipped: []string{"a_b.c"}},
		{name: "dotless name equal to a mapped one", tools: []string{"exec_run", "exec.run"},
			want: map[string]string{"exec_run": "exec.run"}, skipped: []string{"exec_run"}},
		{name: "reserved alias names are never taken", tools: []string{"sandbox.execute_bash", "sandbox_get_context"},
			reserved: aliasNames(), want: map[string]string{}, skipped: []string{"sandbox.execute_bash", "sandbox_get_context"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			by, skipped := nameTable(mk(tc.tools...), tc.reserved)
			got := map[string]string{}
			for k, v := range by {
				got[k] = v.Name
			}
			if !mapsEqual(got, tc.want) || !slices.Equal(skipped, tc.skipped) {
				t.Fatalf("got %v skipped %v, want %v skipped %v", got, skipped, tc.want, tc.skipped)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestToolsFollowTheRegistryAndTheRole(t *testing.T) {
	r := newRig(t, dispatch.Options{}, Options{})
	rc := &recorder{}
	r.d.MustRegister(rc.tool("sandbox.list", `{"type":"object"}`, []sandbox.Info{}, auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer))
	r.d.MustRegister(rc.tool("exec.run", `{"type":"object","properties":{"command":{"type":"string"}}}`, nil))

	changed := make(chan struct{}, 16)
	cs := r.mustConnect("k-agent", &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	want := []string{"exec_run", AliasBash, AliasContext, "sandbox_list"}
	slices.Sort(want)
	if got := toolNames(t, cs); !slices.Equal(got, want) {
		t.Fatalf("agent tools = %v, want %v", got, want)
	}
	viewer := r.mustConnect("k-viewer", nil)
	if got := toolNames(t, viewer); !slices.Equal(got, []string{AliasContext, "sandbox_list"}) {
		t.Fatalf("viewer tools = %v (exec and its alias must not be listed)", got)
	}
	if res, err := viewer.CallTool(context.Background(), &sdk.CallToolParams{Name: "exec_run", Arguments: map[string]any{"command": "id"}}); err == nil && !res.IsError {
		t.Fatalf("a viewer ran exec.run through MCP: %s", text(res))
	}

	// A tool that comes: list_changed, then listed; and the alias of a
	// tool (sandbox_execute_code → code.execute) with it.
	r.d.MustRegister(rc.tool("code.execute", `{"type":"object","properties":{"code":{"type":"string"},"language":{"type":"string"}}}`, coderun.Result{Stdout: "3\n"}))
	waitFor(t, changed, "list_changed after register")
	testenv.Eventually(t, "code_execute and its alias listed", func() bool {
		got := toolNames(t, cs)
		return slices.Contains(got, "code_execute") && slices.Contains(got, AliasCode)
	})
	out := call(t, cs, AliasCode, map[string]any{"code": "print(1+2)"})
	if out.IsError || rc.last(t)["language"] != "python" || rc.last(t)["code"] != "print(1+2)" {
		t.Fatalf("sandbox_execute_code: %s, target got %v", text(out), rc.last(t))
	}
	// A tool visible to its owner only (an unpublished custom tool) is not
	// listed for another key of the same role.
	mine := rc.tool("mine", `{"type":"object"}`, "ok")
	mine.Visible = func(c auth.Caller) bool { return c.KeyID == "k-agent" }
	r.d.MustRegister(mine)
	testenv.Eventually(t, "the owner sees its tool", func() bool { return slices.Contains(toolNames(t, cs), "mine") })
	if got := toolNames(t, r.mustConnect("k-agent2", nil)); slices.Contains(got, "mine") {
		t.Fatalf("another key sees an unpublished tool: %v", got)
	}
	// A tool that goes: list_changed, then gone with its alias.
	r.d.Unregister("code.execute")
	testenv.Eventually(t, "code_execute and its alias gone", func() bool {
		got := toolNames(t, cs)
		return !slices.Contains(got, "code_execute") && !slices.Contains(got, AliasCode)
	})
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

func TestAliasesTranslateArguments(t *testing.T) {
	r := newRig(t, dispatch.Options{}, Options{})
	exec, read, find, write := &recorder{}, &recorder{}, &recorder{}, &recorder{}
	exit0 := 0
	r.d.MustRegister(exec.tool("exec.run", `{"type":"object"}`, sandbox.ExecResult{Result: sandbox.Result{
		ID: "c1", Status: "completed", ExitCode: &exit0, Stdout: "hi\n", Stderr: "warn\n"}}))
	// AIO's HTTP names (file, …) for read; path-named schema for find.
	r.d.MustRegister(read.tool("file.read", `{"type":"object","properties":{"file":{"type":"string"},"start_line":{"type":"integer"}}}`, map[string]any{"content": "x"}))
	r.d.MustRegister(find.tool("file.find", `{"type":"object","properties":{"path":{"type":"string"},"glob":{"type":"string"}}}`, map[string]any{"files": []string{}}))
	r.d.MustRegister(write.tool("file.write", `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`, nil))
	cs := r.mustConnect("k-agent", nil)

	res := call(t, cs, AliasBash, map[string]any{"cmd": "echo hi", "cwd": "/workspace/src"})
	var out map[string]any
	if err := json.Unmarshal([]byte(text(res)), &out); err != nil || res.IsError {
		t.Fatalf("bash: %s (%v)", text(res), err)
	}
	if got := exec.last(t); got["command"] != "echo hi" || got["timeout"] != float64(30) || got["cwd"] != "/workspace/src" {
		t.Fatalf("exec.run got %v", got)
	}
	if out["output"] != "hi\nwarn\n" || out["exit_code"] != float64(0) || out["status"] != "completed" || out["cwd"] != "/workspace/src" {
		t.Fatalf("bash result %v", out)
	}

	cases := []struct {
		name    string
		tool    string
		args    map[string]any
		rec     *recorder
		want    map[string]any
		wantErr string
	}{
		{name: "read: path goes to file", tool: AliasFiles, args: map[string]any{"action": "read", "path": "/workspace/a", "start_line": 2},
			rec: read, want: map[string]any{"file": "/workspace/a", "start_line": float64(2)}},
		{name: "read: default-valued sudo is dropped", tool: AliasFiles, args: map[string]any{"action": "read", "path": "/w/a", "sudo": false},
			rec: read, want: map[string]any{"file": "/w/a"}},
		{name: "read: sudo the target cannot take is refused", tool: AliasFiles, args: map[string]any{"action": "read", "path": "/w/a", "sudo": true},
			wantErr: "parameter sudo is not supported"},
		{name: "find: pattern goes to glob", tool: AliasFiles, args: map[string]any{"action": "find", "path": "/w", "pattern": "*.go"},
			rec: find, want: map[string]any{"path": "/w", "glob": "*.go"}},
		{name: "write: append the target lacks is an error, not an overwrite", tool: AliasFiles,
			args: map[string]any{"action": "write", "path": "/w/a", "content": "x", "append": true}, wantErr: "parameter append is not supported"},
		{name: "write: utf-8 encoding default is dropped", tool: AliasFiles,
			args: map[string]any{"action": "write", "path": "/w/a", "content": "x", "encoding": "utf-8"}, rec: write,
			want: map[string]any{"path": "/w/a", "content": "x"}},
		{name: "misplaced parameter", tool: AliasFiles, args: map[string]any{"action": "read", "path": "/w/a", "recursive": true},
			wantErr: "not used by action read"},
		{name: "unknown parameter", tool: AliasFiles, args: map[string]any{"action": "read", "path": "/w/a", "bogus": 1},
			wantErr: `unknown parameter "bogus"`},
		{name: "unknown action", tool: AliasFiles, args: map[string]any{"action": "chmod", "path": "/w/a"}, wantErr: "unsupported action"},
		{name: "action without its tool", tool: AliasFiles, args: map[string]any{"action": "grep", "path": "/w", "pattern": "x"},
			wantErr: "file action grep is not available"},
		{name: "bash without cmd", tool: AliasBash, args: map[string]any{"cwd": "/"}, wantErr: "cmd is required"},
		{name: "bash with an unknown parameter", tool: AliasBash, args: map[string]any{"cmd": "ls", "shell": "zsh"}, wantErr: "unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, tc.args)
			if tc.wantErr != "" {
				if !res.IsError || !strings.Contains(text(res), tc.wantErr) {
					t.Fatalf("got %v %q, want error %q", res.IsError, text(res), tc.wantErr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("error: %s", text(res))
			}
			got := tc.rec.last(t)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tc.want)
			if string(gb) != string(wb) {
				t.Fatalf("target got %s, want %s", gb, wb)
			}
		})
	}
	if got := toolNames(t, cs); slices.Contains(got, AliasEditor) {
		t.Fatalf("editor alias listed without its tool: %v", got)
	}
}

type needsApproval struct{}

func (needsApproval) Decide(context.Context, auth.Caller, *dispatch.Tool, dispatch.Assessment, any) (dispatch.Decision, string) {
	return dispatch.NeedsApproval, "test"
}

type pendingApprovals struct{}

func (pendingApprovals) Request(context.Context, auth.Caller, *dispatch.Tool, dispatch.Assessment, any) error {
	return &dispatch.ApprovalRequired{ID: "apr_test1"}
}

func TestErrorsAreToolErrors(t *testing.T) {
	r := newRig(t, dispatch.Options{}, Options{})
	hidden := "/var/lib/sandhold/secret/path"
	r.d.MustRegister(dispatch.Tool{Name: "sandbox.get", Risk: guard.Safe, InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, auth.Caller, any) (any, error) {
			return nil, fault.Wrap(fault.NotFound, errors.New("open "+hidden), "no such sandbox")
		}})
	r.d.MustRegister(dispatch.Tool{Name: "boom.internal", Risk: guard.Safe,
		Run: func(context.Context, auth.Caller, any) (any, error) { return nil, errors.New("disk " + hidden) }})
	cs := r.mustConnect("k-agent", nil)
	for name, want := range map[string]string{"sandbox_get": "no such sandbox", "boom_internal": "internal error"} {
		res := call(t, cs, name, map[string]any{})
		if !res.IsError || text(res) != want {
			t.Fatalf("%s: isError %v text %q, want %q", name, res.IsError, text(res), want)
		}
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Fatal("unknown tool: no protocol error")
	}

	ar := newRig(t, dispatch.Options{Policy: needsApproval{}, Approvals: pendingApprovals{}}, Options{})
	ar.d.MustRegister(dispatch.Tool{Name: "exec.run", Risk: guard.Dangerous,
		Run: func(context.Context, auth.Caller, any) (any, error) { t.Error("ran without approval"); return nil, nil }})
	res := call(t, ar.mustConnect("k-agent", nil), "exec_run", map[string]any{})
	sc, _ := json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(text(res), "apr_test1") || !strings.Contains(string(sc), `"approval_id":"apr_test1"`) {
		t.Fatalf("approval result: %v %q %s", res.IsError, text(res), sc)
	}
}

func TestSessionsAreBoundedAndBelongToTheirKey(t *testing.T) {
	r := newRig(t, dispatch.Options{}, Options{MaxSessions: 3, MaxSessionsPerKey: 2})
	a1 := r.mustConnect("k-agent", nil)
	r.mustConnect("k-agent", nil)
	if _, err := r.connect("k-agent", nil); err == nil || !strings.Contains(err.Error(), "429") && !strings.Contains(err.Error(), "Too Many") {
		t.Fatalf("third session of a key: %v", err)
	}
	r.mustConnect("k-agent2", nil)
	if _, err := r.connect("k-viewer", nil); err == nil {
		t.Fatal("a session beyond the server's cap was opened")
	}
	if n := r.hub.Sessions(); n != 3 {
		t.Fatalf("sessions = %d", n)
	}
	// Another key presenting a1's session id finds nothing.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	req, _ := http.NewRequest(http.MethodPost, r.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k-agent2")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionHeader, a1.ID())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNotFound || strings.Contains(string(b), "tools") {
		t.Fatalf("hijack: %d %s", res.StatusCode, b)
	}
	// Closing a session frees its slot.
	if err := a1.Close(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); r.hub.Sessions() > 2; {
		if time.Now().After(deadline) {
			t.Fatalf("closed session still counted: %d", r.hub.Sessions())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.mustConnect("k-viewer", nil)
}

func TestRevokeEndsTheKeysSessions(t *testing.T) {
	r := newRig(t, dispatch.Options{}, Options{})
	cs := r.mustConnect("k-agent", nil)
	other := r.mustConnect("k-agent2", nil)
	done := make(chan error, 1)
	go func() { done <- cs.Wait() }()
	r.hub.Revoke("k-agent")
	select {
	case err := <-done:
		t.Logf("session ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked key's session is still open")
	}
	if _, err := r.connect("k-agent", nil); err == nil {
		t.Fatal("a revoked key opened a session")
	}
	if got := toolNames(t, other); !slices.Contains(got, AliasContext) {
		t.Fatalf("another key's session was hurt: %v", got)
	}
}

func TestObjectSchema(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{name: "object kept as is", in: `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
			want: `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
		{name: "null required dropped", in: `{"type":"object","properties":{},"required":null}`, want: `{"properties":{},"type":"object"}`},
		{name: "missing schema", in: ``, want: `{"type":"object"}`},
		{name: "not an object schema", in: `{"type":"array"}`, want: `{"type":"object"}`},
		{name: "not JSON", in: `{"type":`, want: `{"type":"object"}`},
		{name: "spaced type", in: `{"type": "object"}`, want: `{"type": "object"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(objectSchema(json.RawMessage(tc.in))); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
