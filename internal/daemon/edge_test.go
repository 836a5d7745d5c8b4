package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/testenv"
)

// bodyNamedTool routes dispatch the tool named in their body; their route
// admits every role and the dispatcher checks the named tool.
var bodyNamedTool = map[string]bool{"POST /v1/tools/call": true, "POST /mcp": true, "GET /mcp": true, "DELETE /mcp": true}

// TestRoutesAuthorizeBeforeValidation walks every route of the real daemon:
//   - as the admin with a valid request, it learns the tool each route
//     calls and checks that the edge's route table (api.RouteRoles) admits
//     exactly the roles the tool does;
//   - as every role the route refuses, it sends a malformed body and wants
//     403 from the edge (not 400/415/422: the body was never looked at) and
//     no dispatcher call;
//   - as the admin, a text/plain body gets 415 and no dispatcher call;
//   - with no key, the same malformed body gets 401.
func TestRoutesAuthorizeBeforeValidation(t *testing.T) {
	t.Parallel() // its own server, data dir and cgroup base; nothing shared
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), nil)
	ctx := context.Background()
	admin := auth.Caller{KeyID: auth.AdminKeyID, Role: auth.RoleAdmin}
	keys := map[auth.Role]string{auth.RoleAdmin: s.d.AdminKey()}
	for _, role := range []auth.Role{auth.RoleAgent, auth.RoleViewer} {
		_, k, err := s.d.Auth().CreateKey(ctx, admin, string(role), role)
		if err != nil {
			t.Fatal(err)
		}
		keys[role] = k
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	s.d.Dispatcher().Observe(func(ctx context.Context, _ auth.Caller, name string) {
		mu.Lock()
		defer mu.Unlock()
		rid := api.RequestID(ctx)
		seen[rid] = append(seen[rid], name)
	})
	toolsOf := func(rid string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen[rid])
	}
	type route struct{ method, pattern string }
	var routes []route
	if err := chi.Walk(s.d.API().Router(), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, route{method, pattern})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].pattern+routes[i].method < routes[j].pattern+routes[j].method })
	oapi := s.d.API().API().OpenAPI()
	public := map[string]bool{"/healthz": true, "/docs": true, "/openapi.json": true, "/openapi.yaml": true, "/openapi-3.0.json": true, "/openapi-3.0.yaml": true,
		// The web console's pages and sign-in (internal/console tests their rules).
		"/": true, "/console/assets/*": true, "/console/session": true, "/sandboxes/{id}/vnc/index.html": true}
	checked, checked415 := 0, 0
	for _, rt := range routes {
		if public[rt.pattern] || selfAuthenticated[rt.pattern] {
			// Self-authenticated routes take a token, not a key (their
			// calls are walked by TestChokepointConformance, e2bProbes).
			continue
		}
		key := rt.method + " " + rt.pattern
		short := rt.method + " " + strings.TrimPrefix(rt.pattern, "/sandboxes/{id}")
		path := strings.TrimSuffix(pathParam.ReplaceAllStringFunc(rt.pattern, func(string) string { return "x" }), "*")
		allowed := s.d.API().RouteRoles(rt.method, rt.pattern)

		// 1. The table agrees with the tool the route calls.
		if _, skip := notCapabilities[key]; !skip && !bodyNamedTool[short] {
			var body any
			if rt.method == http.MethodPost || rt.method == http.MethodPut || rt.method == http.MethodPatch {
				body = exampleBody(oapi, rt.method, rt.pattern)
			}
			var hdr map[string]string
			if v, ok := validRequests[short]; ok {
				if v.body != nil {
					body = v.body
				}
				hdr = v.header
			}
			rid, _ := s.send(rt.method, path, body, hdr)
			tools := toolsOf(rid)
			if len(tools) > 0 {
				tl, ok := s.d.Dispatcher().Tool(tools[0])
				if !ok {
					t.Errorf("%s: tool %s not registered", key, tools[0])
					continue
				}
				want := tl.Roles
				if len(want) == 0 {
					want = []auth.Role{auth.RoleAdmin, auth.RoleAgent}
				}
				if listed := s.d.API().RouteTool(rt.method, rt.pattern); listed != "" && listed != tl.Name {
					t.Errorf("%s: route table names tool %s, the route calls %s", key, listed, tl.Name)
				}
				if !sameRoles(allowed, want) {
					t.Errorf("%s: route table admits %v, its tool %s admits %v", key, allowed, tl.Name, want)
				}
			}
		}

		// 2. Wrong roles: 403 before the body is looked at.
		var bad any
		if rt.method == http.MethodPost || rt.method == http.MethodPut || rt.method == http.MethodPatch {
			bad = `{"malformed": [1, 2,` // not JSON at all
		}
		for _, role := range []auth.Role{auth.RoleAgent, auth.RoleViewer} {
			if slices.Contains(allowed, role) {
				continue
			}
			status, rid, raw := rawSend(t, s.base, rt.method, path, keys[role], bad)
			if status != http.StatusForbidden {
				t.Errorf("%s as %s with a malformed body: %d %s (want 403 before validation)", key, role, status, raw)
				continue
			}
			if tools := toolsOf(rid); len(tools) > 0 {
				t.Errorf("%s as %s reached the dispatcher: %v", key, role, tools)
			}
			checked++
		}
		// 3. The right caller with a text/plain body: 415, nothing runs
		// (upload routes take multipart or raw bytes, never text).
		if bad != nil && !s.d.API().RelaysBody(rt.pattern) {
			status, rid, raw := rawSend(t, s.base, rt.method, path, s.d.AdminKey(), bad)
			if status != http.StatusUnsupportedMediaType {
				t.Errorf("%s as admin with text/plain: %d %s (want 415)", key, status, raw)
			} else if tools := toolsOf(rid); len(tools) > 0 {
				t.Errorf("%s with text/plain reached the dispatcher: %v", key, tools)
			}
			checked415++
		}
		// 4. No key: 401.
		if status, _, _ := rawSend(t, s.base, rt.method, path, "", bad); status != http.StatusUnauthorized {
			t.Errorf("%s without a key: %d", key, status)
		}
	}
	if checked < 40 {
		t.Fatalf("only %d refusals checked; the walk is not covering the routes", checked)
	}
	if checked415 < 30 {
		t.Fatalf("only %d routes with a body checked for 415", checked415)
	}
	t.Logf("%d routes, %d wrong-role refusals and %d content-type refusals checked", len(routes), checked, checked415)
}

// TestPolicyPutAsAgentLearnsNothing is the case: an agent key
// sending PUT /v1/policy with a malformed body gets 403, never 422.
func TestPolicyPutAsAgentLearnsNothing(t *testing.T) {
	s := start(t, t.TempDir(), nil)
	_, agent, err := s.d.Auth().CreateKey(context.Background(), auth.Caller{Role: auth.RoleAdmin}, "a", auth.RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []any{`{"roles": 7}`, `not json`, map[string]any{"roles": map[string]any{"agent": map[string]any{"default": "allow"}}}} {
		r := s.do(http.MethodPut, "/v1/policy", agent, body, nil)
		if r.status != http.StatusForbidden || strings.Contains(string(r.raw), "roles") {
			t.Fatalf("PUT /v1/policy as agent (%v): %d %s", body, r.status, r.raw)
		}
	}
}

// rawSend sends body (a string, or nothing) as text/plain: a type no JSON
// route takes, so any answer but 401/403 means the body was looked at.
func rawSend(t *testing.T, base, method, path, key string, body any) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if b, ok := body.(string); ok {
		rd = strings.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "text/plain")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode, res.Header.Get("X-Request-Id"), string(raw)
}

func sameRoles(a, b []auth.Role) bool {
	if len(a) != len(b) {
		return false
	}
	for _, r := range a {
		if !slices.Contains(b, r) {
			return false
		}
	}
	return true
}

// TestExecRefusesNonJSONContentTypes is the case: POST
// /v1/sandboxes/{id}/exec with a content type a browser may send
// cross-origin without a preflight must not run the command.
func TestExecRefusesNonJSONContentTypes(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), nil)
	var calls sync.Map
	s.d.Dispatcher().Observe(func(ctx context.Context, _ auth.Caller, name string) { calls.Store(api.RequestID(ctx), name) })
	r := s.do(http.MethodPost, "/v1/sandboxes", s.d.AdminKey(), map[string]any{}, nil)
	var sb struct {
		ID string `json:"id"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.env.Data, &sb) != nil || sb.ID == "" {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	body := `{"command":"touch /workspace/ran"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		r := s.do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", s.d.AdminKey(), body, map[string]string{"Content-Type": ct})
		if r.status != http.StatusUnsupportedMediaType {
			t.Errorf("%s: %d %s", ct, r.status, r.raw)
		}
		if name, ok := calls.Load(r.header.Get("X-Request-Id")); ok {
			t.Errorf("%s reached the dispatcher (%v)", ct, name)
		}
	}
	r = s.do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", s.d.AdminKey(), map[string]any{"command": "test ! -e /workspace/ran && echo clean"}, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.raw), "clean") {
		t.Fatalf("json exec: %d %s", r.status, r.raw)
	}
}
