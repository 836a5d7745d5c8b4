package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/sandbox/orphan"
	"github.com/sandhold/sandhold/internal/store"
)

type fakeNodes struct {
	self  string
	nodes []store.Node
	owner map[string]string
	rows  map[string][]store.SandboxRow // by node
	// records are sandbox records by id (SandboxOn; absent: {}); on
	// says where SandboxOn finds a sandbox that moved since SandboxNode.
	records map[string]string
	on      map[string]string
	// lookups counts SandboxNode calls (store queries).
	lookups atomic.Int64
}

func (f *fakeNodes) NodeSandboxes(_ context.Context, node string) ([]store.SandboxRow, error) {
	return f.rows[node], nil
}

func (f *fakeNodes) NodeName() string                            { return f.self }
func (f *fakeNodes) Nodes(context.Context) ([]store.Node, error) { return f.nodes, nil }
func (f *fakeNodes) Heartbeat(context.Context, store.Beat) error { return nil }
func (f *fakeNodes) SandboxNode(_ context.Context, id string) (string, error) {
	f.lookups.Add(1)
	if n, ok := f.owner[id]; ok {
		return n, nil
	}
	return "", store.ErrNotFound
}

func (f *fakeNodes) SandboxOn(_ context.Context, id string) (store.SandboxRow, string, error) {
	f.lookups.Add(1)
	n, ok := f.owner[id]
	if !ok {
		return store.SandboxRow{}, "", store.ErrNotFound
	}
	if m, ok := f.on[id]; ok {
		n = m
	}
	rec := f.records[id]
	if rec == "" {
		rec = "{}"
	}
	return store.SandboxRow{ID: id, Record: []byte(rec)}, n, nil
}

const secret = "0123456789abcdef0123456789abcdef"

// A signed request is served where it lands (never forwarded again) with
// the client address it vouches for; anything else about the signature is
// refused before the API sees the request.
func TestNodeSignature(t *testing.T) {
	sender := NewForwarder(&fakeNodes{self: "node-a"}, secret, nil)
	var seen string
	recv := NewForwarder(&fakeNodes{self: "node-b"}, secret, nil).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.RemoteAddr
		if r.Header.Get(HeaderNodeAuth) != "" {
			t.Error("the signature reached the API")
		}
	}))
	uri := "/v1/sandboxes/sb1/exec?x=1"
	good := sender.sign("POST", uri, "203.0.113.7")
	old := NewForwarder(&fakeNodes{self: "node-a"}, secret, nil)
	old.now = func() time.Time { return time.Now().Add(-time.Minute) }
	stale := old.sign("POST", uri, "203.0.113.7")
	other := NewForwarder(&fakeNodes{self: "node-a"}, strings.Repeat("x", 32), nil).sign("POST", uri, "203.0.113.7")
	tests := []struct {
		name, method, uri, sig string
		want                   int
	}{
		{"valid", "POST", uri, good, 200},
		{"other method", "GET", uri, good, 403},
		{"other uri", "POST", "/v1/sandboxes/sb2/exec?x=1", good, 403},
		{"other query", "POST", "/v1/sandboxes/sb1/exec?x=2", good, 403},
		{"stale", "POST", uri, stale, 403},
		{"other secret", "POST", uri, other, 403},
		{"client swapped", "POST", uri, strings.Replace(good, "203.0.113.7", "198.51.100.1", 1), 403},
		{"malformed", "POST", uri, "v1 node-a", 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen = ""
			req := httptest.NewRequest(tc.method, tc.uri, nil)
			req.Header.Set(HeaderNodeAuth, tc.sig)
			rec := httptest.NewRecorder()
			recv.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want == 200 && seen != "203.0.113.7:0" {
				t.Fatalf("client address = %q", seen)
			}
		})
	}
	// A node without the secret accepts no signature at all.
	bare := NewForwarder(&fakeNodes{self: "node-b"}, "", nil).Handler(http.NotFoundHandler())
	req := httptest.NewRequest("POST", uri, nil)
	req.Header.Set(HeaderNodeAuth, good)
	rec := httptest.NewRecorder()
	bare.ServeHTTP(rec, req)
	if rec.Code != 403 {
		t.Fatalf("node without a secret: %d", rec.Code)
	}
}

func TestPlacementAndLost(t *testing.T) {
	now := time.Now()
	nodes := &fakeNodes{self: "node-a", owner: map[string]string{"sbc": "node-c", "sbz": "node-z", "sbbad": "node-c"},
		records: map[string]string{"sbbad": "{not a record"}, nodes: []store.Node{
			{Name: "node-a", Address: "a:1", Heartbeat: now, Sandboxes: 3},
			{Name: "node-b", Address: "b:1", Heartbeat: now, Sandboxes: 1, Draining: true},
			{Name: "node-c", Address: "c:1", Heartbeat: now.Add(-time.Minute), Sandboxes: 0},
			{Name: "node-d", Address: "d:1", Heartbeat: now, Sandboxes: 2},
			{Name: "node-e", Address: "e:1", Heartbeat: now, Sandboxes: 2},
		}}
	f := NewForwarder(nodes, secret, nil)
	n, ok := f.place(context.Background())
	if !ok || n.Name != "node-d" {
		t.Fatalf("placed on %+v, want node-d (least loaded, live, not draining; ties by name)", n)
	}
	// A running sandbox of a dead node is lost with it, but the forwarder
	// does not say so before authentication (any credential-shaped header
	// would learn the id exists): it serves the request here, where the
	// API answers 503 to the owner and 404 to others (orphan.WithLost).
	var served string
	h := f.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = r.URL.Path
		w.WriteHeader(http.StatusNotFound)
	}))
	for _, id := range []string{"sbc", "sbz"} {
		served = ""
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/v1/sandboxes/"+id, nil)
		req.Header.Set("Authorization", "Bearer shk_x")
		h.ServeHTTP(rec, req)
		if served == "" || rec.Code != 404 || strings.Contains(rec.Body.String(), "lost") {
			t.Fatalf("%s on a dead node: %d %s, want served here (the API answers)", id, rec.Code, rec.Body)
		}
	}
	// A record that cannot be read is answered lost, as a store failure.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/sandboxes/sbbad", nil)
	req.Header.Set("Authorization", "Bearer shk_x")
	h.ServeHTTP(rec, req)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"state":"lost"`) {
		t.Fatalf("an unreadable record on a dead node: %d %s", rec.Code, rec.Body)
	}
	// Without the secret nothing is placed elsewhere.
	if n, ok := NewForwarder(nodes, "", nil).place(context.Background()); !ok || n.Name != "node-a" {
		t.Fatalf("without a secret placed on %+v", n)
	}
}

// TestDeadOwnerServedHereUnmoved: a request for a hibernated sandbox of
// a dead node is served here, its context marked for the call that may
// take the sandbox over after authentication (orphan.With); the
// forwarder itself moves nothing (Nodes has no way to). Without a
// credential nothing is looked up or marked; a sandbox that moved since
// is routed where it is now.
func TestDeadOwnerServedHereUnmoved(t *testing.T) {
	now := time.Now()
	hibernated := `{"restore":{"snapshot":"snap1","hibernated":true}}`
	nodes := &fakeNodes{self: "node-a",
		owner:   map[string]string{"sbh": "node-c", "sbgone": "node-z", "sbb": "node-c", "sbhere": "node-c"},
		records: map[string]string{"sbh": hibernated, "sbgone": hibernated, "sbb": hibernated, "sbhere": hibernated},
		on:      map[string]string{"sbb": "node-b", "sbhere": "node-a"},
		nodes: []store.Node{
			{Name: "node-a", Address: "a:1", Heartbeat: now},
			{Name: "node-b", Address: "b:1", Heartbeat: now},
			{Name: "node-c", Address: "c:1", Heartbeat: now.Add(-time.Minute)},
		}}
	f := NewForwarder(nodes, secret, nil)
	var served, marked string
	h := f.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		served = r.URL.Path
		marked, _ = orphan.Of(r.Context(), strings.TrimPrefix(r.URL.Path, "/v1/sandboxes/"))
	}))
	tests := []struct {
		name, id   string
		credential bool
		want       string // the mark; "-" not served here
	}{
		{"dead node", "sbh", true, "node-c"},
		{"never registered node", "sbgone", true, "node-z"},
		{"no credential", "sbh", false, ""},
		{"taken over here", "sbhere", true, ""},
		{"taken over by a live node", "sbb", true, "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			served, marked = "", ""
			before := nodes.lookups.Load()
			req := httptest.NewRequest("GET", "/v1/sandboxes/"+tc.id, nil)
			if tc.credential {
				req.Header.Set("Authorization", "Bearer shk_x")
			}
			if tc.want == "-" {
				if _, n, ok := f.route(req); !ok || n.Name != "node-b" {
					t.Fatalf("routed to %+v (%v), want node-b", n, ok)
				}
				return
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			if served == "" || marked != tc.want {
				t.Fatalf("served %q, marked %q; want served here, marked %q", served, marked, tc.want)
			}
			if !tc.credential && nodes.lookups.Load() != before {
				t.Fatal("a request without a credential was looked up")
			}
		})
	}
}

func TestReadinessAndDrain(t *testing.T) {
	now := time.Now()
	nodes := &fakeNodes{self: "node-a", nodes: []store.Node{
		{Name: "node-a", Address: "a:1", Heartbeat: now, Sandboxes: 0},
		{Name: "node-b", Address: "b:1", Heartbeat: now, Sandboxes: 5},
	}}
	f := NewForwarder(nodes, secret, nil)
	h := f.Handler(http.NotFoundHandler())
	probe := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code
	}
	if c := probe(); c != 200 {
		t.Fatalf("ready before draining: %d", c)
	}
	if n, ok := f.place(context.Background()); !ok || n.Name != "node-a" {
		t.Fatalf("placed on %+v before draining", n)
	}
	f.beatOnce(context.Background()) // no address yet: nothing to beat
	f.Drain(context.Background())
	if c := probe(); c != 503 {
		t.Fatalf("ready while draining: %d", c)
	}
	if n, ok := f.place(context.Background()); !ok || n.Name != "node-b" {
		t.Fatalf("a draining node placed on %+v, want the other live node", n)
	}
	// The last node draining: a create is refused, not served here.
	solo := NewForwarder(&fakeNodes{self: "node-a", nodes: nodes.nodes[:1]}, secret, nil)
	solo.Drain(context.Background())
	rec := httptest.NewRecorder()
	solo.Handler(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/sandboxes", nil))
	if rec.Code != 503 {
		t.Fatalf("create on the last, draining node: %d %s", rec.Code, rec.Body)
	}
}

// TestLookupsBeforeAuthentication is row 8 of issue 29: every
// unauthenticated /sandboxes/{random}/… cost a database query. Now a
// request without a credential asks nothing of the store, an unknown id is
// remembered, and each client address has a bounded number of lookups.
func TestLookupsBeforeAuthentication(t *testing.T) {
	nodes := &fakeNodes{self: "node-a", owner: map[string]string{"sbb": "node-b"},
		nodes: []store.Node{{Name: "node-a", Address: "a:1", Heartbeat: time.Now()}}}
	f := NewForwarder(nodes, secret, nil)
	served := 0
	h := f.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	get := func(path, client string, cred bool) int {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = client + ":1234"
		if cred {
			req.Header.Set("X-API-Key", "shk_whatever")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 100 {
		get(fmt.Sprintf("/sandboxes/sb%d/v1/file/list", i), "198.51.100.1", false)
	}
	if n := nodes.lookups.Load(); n != 0 || served != 100 {
		t.Fatalf("%d store queries for requests without a credential (served %d)", n, served)
	}
	for range 5 {
		get("/sandboxes/sbunknown/v1/file/list", "198.51.100.2", true)
	}
	if n := nodes.lookups.Load(); n != 1 {
		t.Fatalf("%d store queries for one unknown id asked 5 times, want 1", n)
	}
	// A client cycling random ids runs out of lookups; another does not.
	refused := 0
	for i := range 2 * lookupBurst {
		if get(fmt.Sprintf("/v1/sandboxes/sbr%d", i), "198.51.100.3", true) == http.StatusTooManyRequests {
			refused++
		}
	}
	if n := nodes.lookups.Load(); n > 1+lookupBurst+1 || refused < lookupBurst-1 {
		t.Fatalf("%d store queries, %d refused, for %d random ids of one client (burst %d)", n, refused, 2*lookupBurst, lookupBurst)
	}
	if code := get("/v1/sandboxes/sbb", "198.51.100.4", true); code == http.StatusTooManyRequests {
		t.Fatal("another client was refused")
	}
	// A create through this node forgets the unknown ids.
	before := nodes.lookups.Load()
	req := httptest.NewRequest("POST", "/v1/sandboxes", nil)
	req.Header.Set("X-API-Key", "shk_whatever")
	h.ServeHTTP(httptest.NewRecorder(), req)
	get("/sandboxes/sbunknown/v1/file/list", "198.51.100.2", true)
	if n := nodes.lookups.Load(); n != before+1 {
		t.Fatalf("after a create: %d new queries for the unknown id, want 1", n-before)
	}
}
