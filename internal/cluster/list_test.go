package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/store"
)

// A node at its capacity gets no new sandbox; when every live node is at
// capacity a create is refused, not squeezed onto one of them.
func TestPlacementSkipsFullNodes(t *testing.T) {
	now := time.Now()
	nodes := &fakeNodes{self: "node-a", nodes: []store.Node{
		{Name: "node-a", Address: "a:1", Heartbeat: now, Sandboxes: 4, Capacity: 0},
		{Name: "node-b", Address: "b:1", Heartbeat: now, Sandboxes: 1, Capacity: 1},
		{Name: "node-c", Address: "c:1", Heartbeat: now, Sandboxes: 2, Capacity: 3},
	}}
	f := NewForwarder(nodes, secret, nil)
	if n, ok := f.place(context.Background()); !ok || n.Name != "node-c" {
		t.Fatalf("placed on %+v, want node-c (node-b is full)", n)
	}
	nodes.nodes[0].Capacity, nodes.nodes[2].Sandboxes = 4, 3
	f.invalidate()
	if n, ok := f.place(context.Background()); !ok || n.Name != nodeFull {
		t.Fatalf("every node full: placed on %+v", n)
	}
	rec := httptest.NewRecorder()
	f.Handler(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/sandboxes", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "SANDBOX_NODE_CAPACITY") {
		t.Fatalf("create with every node full: %d %s", rec.Code, rec.Body)
	}
}

// listNode is a node's API for the list: it answers its own sandboxes for
// the key it is asked with, and records what reached it.
func listNode(t *testing.T, name string, created time.Time, gotAuth *string) *httptest.Server {
	t.Helper()
	f := NewForwarder(&fakeNodes{self: name}, secret, nil)
	return httptest.NewServer(f.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*gotAuth = r.Header.Get("Authorization")
		if r.Header.Get("Authorization") != "Bearer k1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = fmt.Fprintf(w, `{"success":true,"message":"","data":[{"id":"sb-%s","node":%q,"created":%q}],"hint":null}`,
			name, name, created.Format(time.RFC3339Nano))
	})))
}

// GET /v1/sandboxes through any node lists the sandboxes of every live
// node, asked with the caller's own key (each node filters by it); a dead
// node is not asked, its records the caller may see are listed as lost; a
// live one that fails is named in a header; a refusal by the receiving
// node is returned as it is.
func TestListSpansNodes(t *testing.T) {
	now := time.Now()
	var authB, authC, authD string
	b := listNode(t, "node-b", now.Add(-2*time.Minute), &authB)
	defer b.Close()
	c := listNode(t, "node-c", now.Add(-3*time.Minute), &authC)
	defer c.Close()
	d := listNode(t, "node-d", now, &authD)
	d.Close() // registered and beating, but not answering
	dead := listNode(t, "node-e", now, new(string))
	defer dead.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	nodes := &fakeNodes{self: "node-a", nodes: []store.Node{
		{Name: "node-a", Address: "a:1", Heartbeat: now},
		{Name: "node-b", Address: addr(b), Heartbeat: now},
		{Name: "node-c", Address: addr(c), Heartbeat: now},
		{Name: "node-d", Address: addr(d), Heartbeat: now},
		{Name: "node-e", Address: addr(dead), Heartbeat: now.Add(-time.Hour)},
	}, rows: map[string][]store.SandboxRow{"node-e": {
		{ID: "sb-lost", Owner: "key_1", Record: []byte(fmt.Sprintf(`{"id":"sb-lost","owner":"key_1","created":%q,"spec":{"limits":{"memory":1024}}}`,
			now.Add(-4*time.Minute).Format(time.RFC3339Nano)))},
		{ID: "sb-others", Owner: "key_2", Record: []byte(`{"id":"sb-others","owner":"key_2"}`)},
	}}}
	h := NewForwarder(nodes, secret, nil).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k1" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"success":false}`))
			return
		}
		_ = auth.WithCaller(r.Context(), auth.Caller{KeyID: "key_1", Role: auth.RoleAgent}) // the API's authentication
		_, _ = fmt.Fprintf(w, `{"success":true,"message":"","data":[{"id":"sb-a","created":%q}],"hint":null}`, now.Add(-time.Minute).Format(time.RFC3339Nano))
	}))
	req := httptest.NewRequest("GET", "/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer k1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	var env struct {
		Success bool
		Data    []struct{ ID, State, Node string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range env.Data {
		ids = append(ids, s.ID)
	}
	if got := strings.Join(ids, ","); !env.Success || got != "sb-lost,sb-node-c,sb-node-b,sb-a" {
		t.Fatalf("list = %q (success %v), want every live node's sandboxes and the caller's on the dead node, oldest first", got, env.Success)
	}
	if l := env.Data[0]; l.State != "lost" || l.Node != "node-e" {
		t.Fatalf("the dead node's sandbox is listed as %+v, want state lost on node-e", l)
	}
	if authB != "Bearer k1" || authC != "Bearer k1" {
		t.Fatalf("the other nodes were asked with %q / %q, want the caller's key", authB, authC)
	}
	if got := rec.Header().Values(HeaderUnanswered); len(got) != 1 || got[0] != "node-d" {
		t.Fatalf("unanswered = %v, want [node-d]", got)
	}

	// A refused caller gets the receiving node's refusal; nobody else is asked.
	authB = ""
	req = httptest.NewRequest("GET", "/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 || authB != "" {
		t.Fatalf("refused caller: %d, node-b asked with %q", rec.Code, authB)
	}
}

// countingNodes counts the store's owner lookups.
type countingNodes struct {
	fakeNodes
	lookups int
}

func (c *countingNodes) SandboxNode(ctx context.Context, id string) (string, error) {
	c.lookups++
	return c.fakeNodes.SandboxNode(ctx, id)
}

// Who runs a sandbox is asked of the store once, not on every request
// (sandboxes never move); so is an unknown id (ids are random and never
// reused: issue 29, row 8).
func TestOwnerIsRemembered(t *testing.T) {
	now := time.Now()
	nodes := &countingNodes{fakeNodes: fakeNodes{self: "node-a", owner: map[string]string{"sb1": "node-a"},
		nodes: []store.Node{{Name: "node-a", Address: "a:1", Heartbeat: now}}}}
	h := NewForwarder(nodes, secret, nil).Handler(http.NotFoundHandler())
	get := func(path string) {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer shk_x")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	for range 5 {
		get("/v1/sandboxes/sb1")
		get("/v1/sandboxes/nope")
	}
	if nodes.lookups != 2 {
		t.Fatalf("%d owner lookups for 5 requests to a known and 5 to an unknown sandbox, want 1+1", nodes.lookups)
	}
}

// A node that cannot be reached is logged by name and error, never with
// the client's URL (whose query may carry a ticket).
func TestListLogHoldsNoClientQuery(t *testing.T) {
	now := time.Now()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	var logs strings.Builder
	nodes := &fakeNodes{self: "node-a", nodes: []store.Node{
		{Name: "node-a", Address: "a:1", Heartbeat: now},
		{Name: "node-b", Address: strings.TrimPrefix(down.URL, "http://"), Heartbeat: now},
	}}
	f := NewForwarder(nodes, secret, slog.New(slog.NewTextHandler(&logs, nil)))
	h := f.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"success":true,"message":"","data":[],"hint":null}`))
	}))
	const ticket = "sht_NotInAnyLogNotInAnyLogNotInAnyLogNotInAnyLo"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/sandboxes?ticket="+ticket, nil))
	if got := rec.Header().Values(HeaderUnanswered); len(got) != 1 || got[0] != "node-b" {
		t.Fatalf("unanswered = %v", got)
	}
	if !strings.Contains(logs.String(), "node-b") || strings.Contains(logs.String(), ticket) {
		t.Fatalf("log %q: want node-b named and no ticket", logs.String())
	}
}
