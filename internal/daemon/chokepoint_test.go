package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/testenv"
)

// The chokepoint conformance test (issue 29): every way to act — each
// route of the real router (HTTP, WebSocket, relay), each tool through
// POST /v1/tools/call, each tool of MCP's list — is sent once per role and
// state, and what reached the dispatcher (an observer sees every call) is
// held to the chokepoint's promises:
//
//   - it reaches the dispatcher at all (or is listed in notCapabilities);
//   - every call has exactly one audit record;
//   - every tool it calls counts against a rate-limit category, or is on
//     ratelimit's unmetered list;
//   - while halted, every call is refused (reason halted) unless its tool
//     is on dispatch's exempt list;
//   - a revoked key is refused before the dispatcher (401);
//   - a viewer's call of a tool not offered to viewers (one that writes)
//     is refused.
//
// The routes come from chi.Walk, the tools from the dispatcher and MCP's
// own tools/list: a route or tool added tomorrow is walked tomorrow.

// call is one call the dispatcher saw.
type call struct {
	rid, tool, key string
}

// chokepoint is the test's server, keys and record of calls.
type chokepoint struct {
	t        *testing.T
	s        *server
	admin    string
	agentID  string
	agent    string
	viewer   string
	viewerID string
	revoked  string
	sandbox  string

	mu    sync.Mutex
	calls []call
}

// attempt is what one probe did: the calls the dispatcher saw, the audit
// records of its key written meanwhile, the answer's status.
type attempt struct {
	status  int
	calls   []string
	records []audit.Record
}

// probe is one way to act, sent as a given key.
type probe struct {
	name string
	send func(c *chokepoint, key string) (rid string, status int)
	// mcp: the calls are matched by order, not request id (the MCP
	// transport answers on its session's stream).
	mcp bool
}

func TestChokepointConformance(t *testing.T) {
	testenv.RequireSandboxes(t)
	if testing.Short() {
		t.Skip("walks every route four times against real sandboxes")
	}
	s := start(t, t.TempDir(), func(c *config.Config) { c.ContentListen = "127.0.0.1:0" })
	c := &chokepoint{t: t, s: s, admin: s.d.AdminKey()}
	ag := s.createKey("conform-agent", "agent")
	c.agent, c.agentID = ag.Key, ag.ID
	vw := s.createKey("conform-viewer", "viewer")
	c.viewer, c.viewerID = vw.Key, vw.ID
	rv := s.createKey("conform-revoked", "agent")
	// E2B's in-sandbox API takes a sandbox's token, not a key: each key
	// gets one while it is valid (e2b_conform_test.go).
	grants := map[string]e2bGrant{}
	for _, k := range []string{c.admin, rv.Key} {
		id, token := e2bSandbox(t, s, k)
		grants[k] = e2bGrant{sandbox: id, token: token}
	}
	expectOK(t, s.do("DELETE", "/v1/keys/"+rv.ID, c.admin, nil, nil), 200, nil)
	c.revoked = rv.Key
	s.d.Dispatcher().Observe(func(ctx context.Context, caller auth.Caller, name string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.calls = append(c.calls, call{rid: api.RequestID(ctx), tool: name, key: caller.KeyID})
	})
	c.ensureSandbox()

	probes := append(c.routeProbes(s.d.API().Router(), ""), c.routeProbes(s.d.API().ContentRouter(), "content ")...)
	probes = append(probes, c.toolCallProbes()...)
	probes = append(probes, c.e2bProbes(grants)...)
	mcpProbes := c.mcpProbes()
	probes = append(probes, mcpProbes...)
	t.Logf("%d probes: %d routes and tools/call calls, %d MCP tools", len(probes), len(probes)-len(mcpProbes), len(mcpProbes))

	tools := map[string]*dispatch.Tool{}
	for _, tl := range s.d.Dispatcher().Tools() {
		tools[tl.Name] = tl
	}
	exempt := dispatch.HaltExempt()
	unmetered := ratelimit.Unmetered()
	var fails []string
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }

	// 1. As the admin, in the normal state: every probe reaches the
	// dispatcher, each call has one record, each tool is metered.
	reached := map[string][]string{}
	for _, p := range probes {
		a := c.try(p, c.admin, adminID)
		if len(a.calls) == 0 {
			if !notCapable(p.name) {
				fail("%s: reached no tool (status %d)", p.name, a.status)
			}
			continue
		}
		reached[p.name] = a.calls
		if msg := oneRecordPerCall(a); msg != "" {
			fail("%s: %s", p.name, msg)
		}
		for _, tool := range a.calls {
			tl := tools[tool]
			if tl == nil {
				continue // a custom tool made by a probe
			}
			if ratelimit.ForTool(tool, tl.Category) == 0 && unmetered[tool] == "" {
				fail("%s: calls %s, which has no rate-limit category", p.name, tool)
			}
		}
	}

	// 2. Halted: every call is refused, unless its tool is exempt.
	c.halt()
	for _, p := range probes {
		if _, ok := reached[p.name]; !ok {
			continue
		}
		a := c.try(p, c.admin, adminID)
		for _, r := range a.records {
			if _, ok := exempt[r.Action]; ok || tools[r.Action] == nil {
				continue
			}
			if r.Verdict != "denied" || r.Detail["reason"] != "halted" {
				fail("%s: %s ran while halted (verdict %s, reason %v)", p.name, r.Action, r.Verdict, r.Detail["reason"])
			}
		}
		c.halt() // control.unhalt is exempt: a probe of it unhalts
	}
	c.unhalt()

	// 3. A revoked key: refused before the dispatcher.
	for _, p := range probes {
		if _, ok := reached[p.name]; !ok || p.mcp {
			continue // MCP: a revoked key opens no session (below)
		}
		a := c.try(p, c.revoked, "")
		if len(a.calls) > 0 || (a.status != http.StatusUnauthorized && a.status != http.StatusTooManyRequests) {
			fail("%s: a revoked key got %d and reached %v", p.name, a.status, a.calls)
		}
	}
	if cs, err := c.connectMCP(c.revoked); err == nil {
		_ = cs.Close()
		fail("MCP: a revoked key opened a session")
	}

	// 4. A viewer: a tool not offered to viewers is refused.
	for _, p := range probes {
		if _, ok := reached[p.name]; !ok {
			continue
		}
		a := c.try(p, c.viewer, c.viewerID)
		for _, r := range a.records {
			tl := tools[r.Action]
			if tl == nil || slices.Contains(tl.Roles, auth.RoleViewer) {
				continue
			}
			if r.Verdict != "denied" {
				fail("%s: a viewer's call of %s (not offered to viewers) ended %s", p.name, r.Action, r.Verdict)
			}
		}
	}
	if len(fails) > 0 {
		sort.Strings(fails)
		t.Fatalf("%d broken promises of the chokepoint:\n  %s", len(fails), strings.Join(fails, "\n  "))
	}
}

// notCapable reports whether a route is listed in notCapabilities, in
// its own form or (for /sandboxes/{id}/…) in its form without the prefix.
func notCapable(name string) bool {
	name = strings.TrimPrefix(name, "content ")
	if _, ok := e2bNotServed[strings.TrimPrefix(name, "e2b ")]; ok {
		return true
	}
	if _, ok := notCapabilities[name]; ok {
		return true
	}
	_, ok := notCapabilities[strings.Replace(name, " /sandboxes/{id}/", " /", 1)]
	return ok
}

// mcpArgs are arguments for MCP tools that check their own before they
// call a dispatcher tool (AIO's aliases); others get {}.
var mcpArgs = map[string]map[string]any{
	"sandbox_execute_bash":       {"cmd": "true"},
	"sandbox_execute_code":       {"code": "1"},
	"sandbox_file_operations":    {"action": "list", "path": "/workspace"},
	"sandbox_str_replace_editor": {"command": "view", "path": "/workspace"},
}

// adminID is the admin key's id in the audit log.
const adminID = "key_admin"

// try sends p as key and gathers what it did. keyID names the key's audit
// records ("" for a key that has none: a revoked one).
func (c *chokepoint) try(p probe, key, keyID string) attempt {
	c.t.Helper()
	c.ensureSandbox()
	before := c.lastSeq()
	c.mu.Lock()
	from := len(c.calls)
	c.mu.Unlock()
	rid, status := p.send(c, key)
	var a attempt
	a.status = status
	matched := func() []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []string
		for _, x := range c.calls[from:] {
			if p.mcp || (rid != "" && x.rid == rid) {
				out = append(out, x.tool)
			}
		}
		return out
	}
	a.calls = matched()
	if keyID == "" || len(a.calls) == 0 {
		return a
	}
	// A record follows its call's run (streams, terminals end later):
	// wait until every call seen has one, or report what there is.
	deadline := time.Now().Add(20 * time.Second)
	for {
		a.records = c.recordsAfter(before, keyID)
		a.calls = matched()
		if len(a.records) >= len(a.calls) || time.Now().After(deadline) {
			return a
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// oneRecordPerCall compares a probe's calls with its records, tool by
// tool.
func oneRecordPerCall(a attempt) string {
	want := map[string]int{}
	for _, t := range a.calls {
		want[t]++
	}
	got := map[string]int{}
	for _, r := range a.records {
		got[r.Action]++
	}
	for t, n := range want {
		if got[t] != n {
			return fmt.Sprintf("%d calls of %s, %d audit records", n, t, got[t])
		}
	}
	return ""
}

func (c *chokepoint) lastSeq() int64 {
	recs, err := c.s.d.Audit().Query(context.Background(), audit.Filter{Descending: true, Limit: 1})
	if err != nil {
		c.t.Fatal(err)
	}
	if len(recs) == 0 {
		return 0
	}
	return recs[0].Seq
}

func (c *chokepoint) recordsAfter(seq int64, keyID string) []audit.Record {
	recs, err := c.s.d.Audit().Query(context.Background(), audit.Filter{AfterSeq: seq, Actor: keyID})
	if err != nil {
		c.t.Fatal(err)
	}
	// Records of the key's own business that are no tool call (auth,
	// an execution's end) are not calls.
	out := recs[:0]
	for _, r := range recs {
		if _, ok := c.s.d.Dispatcher().Tool(r.Action); ok {
			out = append(out, r)
		}
	}
	return out
}

func (c *chokepoint) halt() {
	c.t.Helper()
	if _, err := c.s.d.Dispatcher().Call(context.Background(), auth.Caller{KeyID: adminID, Role: auth.RoleAdmin}, "control.halt", json.RawMessage(`{"reason":"conformance"}`)); err != nil {
		// Halting again is exempt and Safe; a refusal is a bug.
		c.t.Fatalf("halt: %v", err)
	}
}

func (c *chokepoint) unhalt() {
	c.t.Helper()
	expectOK(c.t, c.s.do("POST", "/v1/control/unhalt", c.admin, nil, nil), 200, nil)
}

// ensureSandbox keeps one running sandbox of the agent's for the
// /sandboxes/{id}/… routes (a probe may delete or pause it).
func (c *chokepoint) ensureSandbox() {
	c.t.Helper()
	if c.sandbox != "" {
		if sb, err := c.s.d.Sandboxes().Get(sandbox.Caller{Admin: true}, c.sandbox); err == nil {
			if sb.State() == sandbox.Paused {
				_ = c.s.d.Sandboxes().Resume(context.Background(), sandbox.Caller{Admin: true}, c.sandbox)
			}
			return
		}
	}
	info, err := c.s.d.Sandboxes().Create(context.Background(), sandbox.Caller{KeyID: c.agentID}, sandbox.Spec{Name: "conform"})
	if err != nil {
		c.t.Fatalf("sandbox for the walk: %v", err)
	}
	c.sandbox = info.ID
}

// routeProbes are a router's routes (chi.Walk), each with a request its
// handler accepts (routes_test.go's bodies and headers); origin "content "
// sends them to the content listener.
func (c *chokepoint) routeProbes(router chi.Router, origin string) []probe {
	var out []probe
	oapi := c.s.d.API().API().OpenAPI()
	err := chi.Walk(router, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		pattern = strings.ReplaceAll(pattern, "/*/", "/")
		if selfAuthenticated[pattern] {
			return nil // a token, not a key: e2bProbes
		}
		name := origin + method + " " + pattern
		var body any
		if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
			body = exampleBody(oapi, method, pattern)
		}
		var hdr map[string]string
		tail := ""
		if v, ok := validRequests[method+" "+strings.TrimPrefix(pattern, "/sandboxes/{id}")]; ok {
			if v.body != nil {
				body = v.body
			}
			hdr, tail = v.header, v.suffix
		}
		out = append(out, probe{name: name, send: func(c *chokepoint, key string) (string, int) {
			path := pathParam.ReplaceAllStringFunc(pattern, func(p string) string {
				n := strings.Trim(p, "{}")
				if v, ok := pathValues[n]; ok {
					return v
				}
				if n == "id" {
					return c.sandbox
				}
				return "x"
			})
			if strings.HasSuffix(path, "*") {
				path = strings.TrimSuffix(path, "*") + tail
			}
			base := c.s.base
			if origin != "" {
				base = "http://" + c.s.d.ContentAddr()
			}
			return c.s.sendTo(base, key, method, path, body, hdr)
		}})
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// harmful are tools whose call with empty arguments would change what the
// rest of the walk runs on; their probes name a harmless target instead.
var harmful = map[string]map[string]any{
	// A document that does not validate: the policy stays as it is.
	"policy.set": {"roles": map[string]any{"agent": map[string]any{"allow_up_to": "bogus"}}},
}

// toolCallProbes are POST /v1/tools/call of every registered tool.
func (c *chokepoint) toolCallProbes() []probe {
	var out []probe
	for _, tl := range c.s.d.Dispatcher().Tools() {
		args, ok := harmful[tl.Name]
		if !ok {
			args = map[string]any{}
		}
		if tl.Name == "control.halt" {
			continue // probed by its route; here it would halt the normal pass
		}
		body := map[string]any{"name": tl.Name, "arguments": args}
		out = append(out, probe{name: "tools/call " + tl.Name, send: func(c *chokepoint, key string) (string, int) {
			return c.s.sendTo(c.s.base, key, http.MethodPost, "/v1/tools/call", body, nil)
		}})
	}
	return out
}

// mcpProbes are MCP's tools/call of every tool in MCP's own list (the
// admin's), over one session per key.
func (c *chokepoint) mcpProbes() []probe {
	cs, err := c.connectMCP(c.admin)
	if err != nil {
		c.t.Fatalf("MCP: %v", err)
	}
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			c.t.Fatalf("MCP tools/list: %v", err)
		}
		names = append(names, tl.Name)
	}
	_ = cs.Close()
	sessions := map[string]*sdk.ClientSession{}
	var out []probe
	for _, n := range names {
		if n == "control_halt" {
			continue // as above
		}
		out = append(out, probe{name: "mcp " + n, mcp: true, send: func(c *chokepoint, key string) (string, int) {
			cs := sessions[key]
			if cs == nil {
				var err error
				if cs, err = c.connectMCP(key); err != nil {
					return "", http.StatusUnauthorized
				}
				sessions[key] = cs
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args, ok := mcpArgs[n]
			if !ok {
				args = map[string]any{}
			}
			if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: n, Arguments: args}); err != nil {
				return "mcp", http.StatusBadRequest
			}
			return "mcp", http.StatusOK
		}})
	}
	c.t.Cleanup(func() {
		for _, cs := range sessions {
			_ = cs.Close()
		}
	})
	return out
}

func (c *chokepoint) connectMCP(key string) (*sdk.ClientSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := sdk.NewClient(&sdk.Implementation{Name: "conformance", Version: "1"}, nil)
	return cl.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: c.s.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: key}}, MaxRetries: -1}, nil)
}

// TestEveryToolIsMetered: every tool the server registers counts against a
// rate-limit category, or is on ratelimit's unmetered list with its
// reason; every name on that list and on HALT's exempt list is a real
// tool (a renamed tool must not leave a stale entry behind).
func TestEveryToolIsMetered(t *testing.T) {
	t.Parallel()
	s := start(t, t.TempDir(), nil)
	registered := map[string]bool{}
	var unmetered []string
	free := ratelimit.Unmetered()
	for _, tl := range s.d.Dispatcher().Tools() {
		registered[tl.Name] = true
		if ratelimit.ForTool(tl.Name, tl.Category) == 0 && free[tl.Name] == "" {
			unmetered = append(unmetered, tl.Name)
		}
	}
	if len(unmetered) > 0 {
		sort.Strings(unmetered)
		t.Errorf("tools without a rate-limit category (add one, or list them in ratelimit's unmetered table with the reason): %v", unmetered)
	}
	for name := range free {
		if !registered[name] {
			t.Errorf("unmetered list names %s, which is not a tool", name)
		}
	}
	for name := range dispatch.HaltExempt() {
		if !registered[name] {
			t.Errorf("HALT's exempt list names %s, which is not a tool", name)
		}
	}
}

// TestReadsAreMetered is row 6 of issue 29: sandbox get/list, execution
// reads, tickets, audit queries and the rest were never limited (1,500
// foreign-id GETs grew the audit by 1.4 MB). They count against read now;
// a key held to read=2/m gets its third read refused.
func TestReadsAreMetered(t *testing.T) {
	t.Parallel()
	s := start(t, t.TempDir(), nil)
	var k struct{ Key, ID string }
	expectOK(t, s.do("POST", "/v1/keys", s.d.AdminKey(), map[string]any{"name": "reader", "role": "agent", "rate_limits": "read=2/m:2"}, nil), 201, &k)
	for _, path := range []string{"/v1/sandboxes", "/v1/sandboxes/sbnone"} {
		_ = s.do("GET", path, k.Key, nil, nil)
	}
	r := s.do("GET", "/v1/control", k.Key, nil, nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("third read: %d %s, want 429 with Retry-After", r.status, r.raw)
	}
}
