package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/sandbox/orphan"
	"github.com/sandhold/sandhold/internal/store"
)

// HeaderNodeAuth carries a forwarding node's signature:
// "v1 <node> <unix seconds> <client address> <hex HMAC-SHA256>", the MAC
// over "v1\n<node>\n<time>\n<client>\n<method>\n<request URI>" with the
// cluster secret. A valid one makes the receiving node take the client
// address from it (rate limits and lockouts stay per client) and serve the
// request itself; an invalid one is refused.
const HeaderNodeAuth = "X-Sandhold-Node-Auth"

// signatureWindow is how far a signature's time may be from the
// receiver's clock (both ways: clocks of nodes drift a little).
const signatureWindow = 30 * time.Second

// DeadAfter is how long after its last heartbeat a node counts as dead
// (its sandboxes are then reported lost); HeartbeatEvery is how often a
// live node beats.
const (
	HeartbeatEvery = 2 * time.Second
	DeadAfter      = 10 * time.Second
)

// nodesTTL bounds how stale the forwarder's view of the nodes may be.
const nodesTTL = 500 * time.Millisecond

// Nodes is the store's side of the node registry.
type Nodes interface {
	NodeName() string
	Nodes(ctx context.Context) ([]store.Node, error)
	SandboxNode(ctx context.Context, id string) (string, error)
	// NodeSandboxes returns node's sandbox records (a dead node's are
	// listed as lost).
	NodeSandboxes(ctx context.Context, node string) ([]store.SandboxRow, error)
	Heartbeat(ctx context.Context, b store.Beat) error
	// SandboxOn returns sandbox id's record and the node that holds it.
	SandboxOn(ctx context.Context, id string) (store.SandboxRow, string, error)
}

// Forwarder routes requests for a sandbox to the node that runs it, and new
// sandboxes to the least loaded live node. Mount it in front of the API
// (Handler); it passes everything else through untouched.
type Forwarder struct {
	nodes  Nodes
	self   string
	secret []byte
	log    *slog.Logger
	now    func() time.Time
	proxy  *httputil.ReverseProxy

	draining atomic.Bool
	// capacity is how many sandboxes this node takes (0: no limit), told
	// to the others by the heartbeat.
	capacity atomic.Int64
	// client asks the other nodes for their part of a sandbox list.
	client *http.Client

	// lookups bounds the store lookups of each client address (lookup.go).
	lookups *ratelimit.Limiter
	// mu guards the cached node list and the heartbeat's identity.
	mu       sync.Mutex
	owners   map[string]ownerAt   // sandbox id → the node that runs it
	missing  map[string]time.Time // sandbox ids the store does not know → when it said so
	cached   []store.Node
	cachedAt time.Time
	addr     string
	started  time.Time
}

// NewForwarder returns a forwarder for this node. secret may be empty:
// then requests for another node's sandbox are answered 503 (forwarding
// is not configured) instead of forwarded.
func NewForwarder(nodes Nodes, secret string, log *slog.Logger) *Forwarder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{nodes: nodes, self: nodes.NodeName(), secret: []byte(secret), log: log, now: time.Now, lookups: newLookupLimiter(),
		client: &http.Client{Timeout: listTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(targetKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the client's Host, which every node accepts alike
			pr.Out.Header.Del("X-Forwarded-For")
		},
		FlushInterval: -1, // SSE and streamed output pass through at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f.log.Warn("cluster: forward failed", "node", r.Context().Value(nodeKey{}), "err", err)
			writeError(w, http.StatusBadGateway, "unavailable", "the node running this sandbox did not answer", nil)
		},
	}
	return f
}

type targetKey struct{}
type nodeKey struct{}

// sandboxID returns the sandbox id a path addresses, if any:
// /v1/sandboxes/{id}[/…] and /sandboxes/{id}/….
func sandboxID(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v1/sandboxes/")
	if !ok {
		if rest, ok = strings.CutPrefix(path, "/sandboxes/"); !ok {
			return "", false
		}
	}
	id, _, _ := strings.Cut(rest, "/")
	return id, id != ""
}

// Handler wraps next.
func (f *Forwarder) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sig := r.Header.Get(HeaderNodeAuth); sig != "" {
			client, err := f.verify(r, sig)
			if err != nil {
				f.log.Warn("cluster: refused a node request", "remote", r.RemoteAddr, "err", err)
				writeError(w, http.StatusForbidden, "forbidden", "invalid node signature", nil)
				return
			}
			r.Header.Del(HeaderNodeAuth)
			r.RemoteAddr = client
			next.ServeHTTP(w, r) // forwarded once: served here, never again
			return
		}
		if r.URL.Path == "/readyz" {
			f.ready(w, r)
			return
		}
		if isList(r) && len(f.secret) > 0 {
			f.listAll(w, r, next)
			return
		}
		r, node, ok := f.route(r)
		if isCreate(r) {
			defer f.invalidate() // the counts placement reads just changed
		}
		if !ok || node.Name == f.self {
			next.ServeHTTP(w, r)
			return
		}
		f.forward(w, r, node)
	})
}

// route picks the node for r: the owner of the sandbox it addresses, or for
// a create the least loaded live node. ok=false: serve here, as the
// request returned (a dead node's hibernated sandbox: marked, deadOwner).
func (f *Forwarder) route(r *http.Request) (*http.Request, store.Node, bool) {
	ctx := r.Context()
	if isCreate(r) {
		n, ok := f.place(ctx)
		return r, n, ok
	}
	id, ok := sandboxID(r.URL.Path)
	if !ok {
		return r, store.Node{}, false
	}
	owner, err := f.owner(r, id)
	if errors.Is(err, errLookups) {
		return r, store.Node{Name: nodeBusy}, true // refused in forward
	}
	if err != nil || owner == f.self {
		// Unknown here and everywhere, or a request with no credential:
		// the API answers (404, 401) without the store.
		return r, store.Node{}, false
	}
	if n, ok := f.alive(ctx, owner); ok {
		return r, n, true
	}
	return f.deadOwner(r, id, owner)
}

// alive returns the registered node called name, and whether its
// heartbeat is fresh.
func (f *Forwarder) alive(ctx context.Context, name string) (store.Node, bool) {
	for _, n := range f.list(ctx) {
		if n.Name == name {
			return n, n.Alive(f.now(), DeadAfter)
		}
	}
	return store.Node{}, false
}

// deadOwner routes r, for sandbox id of node owner, which is dead or was
// never registered. A hibernated sandbox left nothing on its node, so the
// request is served here, its context marked (orphan.With): once
// the API has authenticated it, the call that looks the sandbox up takes
// it over by a dispatched sandbox.adopt — its owner's (or an admin's)
// call, past HALT, policy and rate limit, audited — or leaves it where it
// is. Routing moves nothing. Any other sandbox is lost with its node: the
// request is served here too, marked (orphan.WithLost), and the API
// answers 503 to its owner and 404 to any other key — never before
// authentication, which would tell a stranger the id exists. Where the
// sandbox is now is asked of the store (within the client's lookups), not
// of the cache: it may have moved.
func (f *Forwarder) deadOwner(r *http.Request, id, owner string) (*http.Request, store.Node, bool) {
	f.forget(id)
	switch {
	case !hasCredential(r):
		return r, store.Node{}, false // the API answers 401
	case !f.lookups.Allow(clientIP(r.RemoteAddr), ratelimit.Read).Allowed:
		return r, store.Node{Name: nodeBusy}, true
	}
	row, node, err := f.nodes.SandboxOn(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return r, store.Node{}, false // deleted since: the API answers 404
	case err != nil:
		f.log.Warn("cluster: read a dead node's sandbox record", "id", id, "err", err)
		return r, store.Node{Name: owner}, true
	case node == f.self:
		return r, store.Node{}, false // taken over here meanwhile
	case node != owner:
		if n, ok := f.alive(r.Context(), node); ok { // taken over by that node
			f.remember(id, node)
			return r, n, true
		}
		owner = node
	}
	var rec sandbox.Record
	switch err := json.Unmarshal(row.Record, &rec); {
	case err != nil:
		f.log.Warn("cluster: read a dead node's sandbox record", "id", id, "err", err)
		return r, store.Node{Name: owner}, true
	case rec.Restore == nil || !rec.Restore.Hibernated:
		// Lost with its node; whether the caller may learn that is the
		// API's to say, after authentication (orphan.WithLost).
		return r.WithContext(orphan.WithLost(r.Context(), id, owner, rec.Owner)), store.Node{}, false
	}
	return r.WithContext(orphan.With(r.Context(), id, owner)), store.Node{}, false
}

// place returns the live, non-draining node with capacity that has the
// fewest sandboxes (ties by name, so placement is stable), or ok=false to
// create here (no node registered yet: a cluster's first moments).
func (f *Forwarder) place(ctx context.Context) (store.Node, bool) {
	now := f.now()
	var live []store.Node
	full := false
	for _, n := range f.list(ctx) {
		self := n.Name == f.self
		if !n.Alive(now, DeadAfter) || n.Draining || (!self && len(f.secret) == 0) || (self && f.draining.Load()) {
			continue
		}
		if n.Full() {
			full = true
			continue
		}
		live = append(live, n)
	}
	if len(live) == 0 {
		switch {
		case f.draining.Load():
			return store.Node{Name: nodeDraining}, true // refused in forward
		case full:
			return store.Node{Name: nodeFull}, true
		}
		return store.Node{}, false
	}
	sort.SliceStable(live, func(i, j int) bool {
		if live[i].Sandboxes != live[j].Sandboxes {
			return live[i].Sandboxes < live[j].Sandboxes
		}
		return live[i].Name < live[j].Name
	})
	return live[0], true
}

// Placement answers that are not a node: refused in forward.
const (
	nodeDraining = "-draining"
	nodeFull     = "-full"
	nodeBusy     = "-busy" // the client's store lookups are used up (lookup.go)
)

func isCreate(r *http.Request) bool {
	return r.Method == http.MethodPost && (r.URL.Path == "/v1/sandboxes" || r.URL.Path == "/v1/sandboxes/")
}

func (f *Forwarder) invalidate() {
	f.mu.Lock()
	f.cachedAt = time.Time{}
	f.missing = nil // a create: an id asked for before may exist now
	f.mu.Unlock()
}

func (f *Forwarder) list(ctx context.Context) []store.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cached != nil && f.now().Sub(f.cachedAt) < nodesTTL {
		return f.cached
	}
	ns, err := f.nodes.Nodes(ctx)
	if err != nil {
		f.log.Warn("cluster: list nodes", "err", err)
		return f.cached
	}
	f.cached, f.cachedAt = ns, f.now()
	return ns
}

func (f *Forwarder) forward(w http.ResponseWriter, r *http.Request, n store.Node) {
	switch n.Name {
	case nodeDraining:
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node is shutting down and no other node can take the sandbox", nil)
		return
	case nodeFull:
		writeError(w, http.StatusServiceUnavailable, "unavailable", "every node runs as many sandboxes as it takes (SANDBOX_NODE_CAPACITY)", nil)
		return
	case nodeBusy:
		w.Header().Set("Retry-After", strconv.Itoa(lookupRetry))
		writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests for sandboxes this node does not know; retry shortly", nil)
		return
	}
	if n.Address == "" || !n.Alive(f.now(), DeadAfter) {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "sandbox lost: the node running it is down",
			map[string]any{"state": "lost", "node": n.Name})
		return
	}
	if len(f.secret) == 0 {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this sandbox runs on another node and forwarding is not configured (SANDBOX_CLUSTER_SECRET)",
			map[string]any{"node": n.Name})
		return
	}
	target := &url.URL{Scheme: "http", Host: n.Address}
	r2 := r.Clone(context.WithValue(context.WithValue(r.Context(), targetKey{}, target), nodeKey{}, n.Name))
	r2.Header.Set(HeaderNodeAuth, f.sign(r.Method, r.URL.RequestURI(), clientIP(r.RemoteAddr)))
	f.proxy.ServeHTTP(w, r2)
}

func clientIP(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

func (f *Forwarder) mac(node, ts, client, method, uri string) []byte {
	m := hmac.New(sha256.New, f.secret)
	_, _ = fmt.Fprintf(m, "v1\n%s\n%s\n%s\n%s\n%s", node, ts, client, method, uri)
	return m.Sum(nil)
}

func (f *Forwarder) sign(method, uri, client string) string {
	ts := strconv.FormatInt(f.now().Unix(), 10)
	return strings.Join([]string{"v1", f.self, ts, client, hex.EncodeToString(f.mac(f.self, ts, client, method, uri))}, " ")
}

// verify checks a signature and returns the client address it vouches for
// (as host:0, the shape RemoteAddr has).
func (f *Forwarder) verify(r *http.Request, sig string) (string, error) {
	if len(f.secret) == 0 {
		return "", errors.New("forwarding is not configured here")
	}
	p := strings.Split(sig, " ")
	if len(p) != 5 || p[0] != "v1" {
		return "", errors.New("malformed signature")
	}
	got, err := hex.DecodeString(p[4])
	if err != nil || !hmac.Equal(got, f.mac(p[1], p[2], p[3], r.Method, r.URL.RequestURI())) {
		return "", errors.New("bad signature")
	}
	ts, err := strconv.ParseInt(p[2], 10, 64)
	if err != nil {
		return "", errors.New("bad signature time")
	}
	if d := f.now().Sub(time.Unix(ts, 0)); d > signatureWindow || d < -signatureWindow {
		return "", errors.New("signature outside its time window")
	}
	if net.ParseIP(p[3]) == nil {
		return "", errors.New("bad client address")
	}
	return net.JoinHostPort(p[3], "0"), nil
}

// writeError answers with the API's envelope shape.
func writeError(w http.ResponseWriter, status int, code, msg string, extra map[string]any) {
	data := map[string]any{"code": code}
	for k, v := range extra {
		data[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"success": false, "message": msg, "data": data, "hint": nil})
}

// readyTimeout bounds the readiness probe's store round trip.
const readyTimeout = 2 * time.Second

// ready answers GET /readyz for Kubernetes: 200 while the node takes
// traffic and reaches the shared store, 503 once it drains (SIGTERM) or
// while the store does not answer. No authentication, no detail.
func (f *Forwarder) ready(w http.ResponseWriter, r *http.Request) {
	if f.draining.Load() {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "draining", nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if _, err := f.nodes.Nodes(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "store unreachable", nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"success":true,"message":"ready","data":{"status":"ready"},"hint":null}` + "\n"))
}

// Drain stops this node taking new sandboxes: /readyz answers 503, its
// heartbeat says draining (the other nodes place nothing here), and
// creates sent to it are placed on another node. Requests for its own
// sandboxes are still served until the server shuts down.
func (f *Forwarder) Drain(ctx context.Context) {
	f.draining.Store(true)
	f.invalidate()
	f.beatOnce(ctx)
}

// SetCapacity sets how many sandboxes this node takes (0: no limit of its
// own); the next heartbeat tells the other nodes. Placement is by the
// records in the store, so creates that race each other may exceed it by
// the number in flight.
func (f *Forwarder) SetCapacity(n int) { f.capacity.Store(int64(max(n, 0))) }

// Draining reports whether Drain was called.
func (f *Forwarder) Draining() bool { return f.draining.Load() }

func (f *Forwarder) beatOnce(ctx context.Context) {
	f.mu.Lock()
	addr, started := f.addr, f.started
	f.mu.Unlock()
	if addr == "" {
		return // not beating (yet)
	}
	b := store.Beat{Address: addr, Started: started, Draining: f.draining.Load(), Capacity: int(f.capacity.Load())}
	if err := f.nodes.Heartbeat(ctx, b); err != nil && ctx.Err() == nil {
		f.log.Warn("cluster: heartbeat", "err", err)
	}
}

// Beat registers this node at address (what the other nodes forward to)
// and keeps its heartbeat every HeartbeatEvery until ctx ends.
func (f *Forwarder) Beat(ctx context.Context, address string) {
	f.mu.Lock()
	f.addr, f.started = address, time.Now()
	f.mu.Unlock()
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	for {
		f.beatOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
