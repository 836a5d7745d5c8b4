package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/store"
)

// listTimeout bounds one node's answer to a cluster-wide list.
const listTimeout = 5 * time.Second

// maxListBody caps one node's list answer read into memory.
const maxListBody = 8 << 20

// HeaderUnanswered names the live nodes that did not answer a
// cluster-wide list (their sandboxes are missing from it), and dead nodes
// whose records could not be read.
const HeaderUnanswered = "X-Sandhold-Nodes-Unanswered"

func isList(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/v1/sandboxes" || r.URL.Path == "/v1/sandboxes/")
}

// capture is a ResponseWriter that keeps the answer in memory.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header { return c.header }
func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}
func (c *capture) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(b)
}

// listAll answers GET /v1/sandboxes with the sandboxes of every node:
// this node's own answer (which authenticates the caller: a refusal is
// returned as it is), then each other live node's, asked over the signed
// node channel with the client's own credentials, so each node applies the
// same visibility rule (a key sees its own sandboxes, admins all). A live
// node that does not answer in listTimeout is named in HeaderUnanswered
// (its sandboxes are missing); a dead node's sandboxes are listed from the
// shared store's records with state "lost", by the same visibility rule
// applied here to the caller this node's API authenticated.
func (f *Forwarder) listAll(w http.ResponseWriter, r *http.Request, next http.Handler) {
	local := &capture{header: http.Header{}}
	ctx, who := auth.WithCallerSink(r.Context())
	next.ServeHTTP(local, r.WithContext(ctx))
	var env map[string]json.RawMessage
	var items []json.RawMessage
	if local.status != http.StatusOK || json.Unmarshal(local.body.Bytes(), &env) != nil || json.Unmarshal(env["data"], &items) != nil {
		copyAnswer(w, local)
		return
	}
	now := f.now()
	var others, dead []store.Node
	for _, n := range f.list(r.Context()) {
		switch {
		case n.Name == f.self:
		case n.Address != "" && n.Alive(now, DeadAfter):
			others = append(others, n)
		default:
			dead = append(dead, n)
		}
	}
	if len(others) == 0 && len(dead) == 0 { // one node: its answer as it is
		copyAnswer(w, local)
		return
	}
	parts := make([][]json.RawMessage, len(others))
	failed := make([]bool, len(others))
	var wg sync.WaitGroup
	for i, n := range others {
		wg.Go(func() {
			var err error
			if parts[i], err = f.askList(r, n); err != nil {
				failed[i] = true
				f.log.Warn("cluster: a node did not answer a sandbox list", "node", n.Name, "err", err)
			}
		})
	}
	var lost []json.RawMessage
	var lostErr bool
	if c, ok := who(); ok && len(dead) > 0 {
		var err error
		if lost, err = f.lostSandboxes(r.Context(), dead, c); err != nil {
			lostErr = true
			f.log.Warn("cluster: read dead nodes' sandbox records", "err", err)
		}
	}
	wg.Wait()
	var unanswered []string
	for i, p := range parts {
		items = append(items, p...)
		if failed[i] {
			unanswered = append(unanswered, others[i].Name)
		}
	}
	if lostErr { // their records could not be read: say whose are missing
		for _, n := range dead {
			unanswered = append(unanswered, n.Name)
		}
	}
	items = append(items, lost...)
	sortByCreated(items)
	data, err := json.Marshal(items)
	if err != nil {
		copyAnswer(w, local)
		return
	}
	env["data"] = data
	out, err := json.Marshal(env)
	if err != nil {
		copyAnswer(w, local)
		return
	}
	for k, v := range local.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	for _, n := range unanswered {
		w.Header().Add(HeaderUnanswered, n)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)+1))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(out, '\n'))
}

// StateLost is the state of a sandbox whose node is dead: it is not
// recreated elsewhere (its workspace is on that node); the node reaps or
// re-adopts it when it comes back. A hibernated one is listed lost too,
// until a call for it reaches a node that takes it over (sandbox.adopt,
// deadOwner).
const StateLost sandbox.State = "lost"

// lostSandboxes renders the sandbox records of the dead nodes that c may
// see (its own; an admin's or viewer's: all) as list items in state lost.
func (f *Forwarder) lostSandboxes(ctx context.Context, dead []store.Node, c auth.Caller) ([]json.RawMessage, error) {
	all := c.IsAdmin() || c.Role == auth.RoleViewer
	var out []json.RawMessage
	for _, n := range dead {
		rows, err := f.nodes.NodeSandboxes(ctx, n.Name)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if !all && row.Owner != c.KeyID {
				continue
			}
			var rec sandbox.Record
			if err := json.Unmarshal(row.Record, &rec); err != nil {
				return nil, fmt.Errorf("sandbox record %s: %w", row.ID, err)
			}
			in := sandbox.Info{ID: rec.ID, Name: rec.Name, Owner: rec.Owner, Default: rec.Default, State: StateLost,
				Created: rec.Created, Limits: rec.Spec.Limits, Network: rec.Spec.Network, Workspace: "/workspace", Node: n.Name}
			if rec.Spec.TTL > 0 {
				in.TTL = rec.Spec.TTL.String()
			}
			b, err := json.Marshal(in)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// askList asks node n for its own part of the list r asks for.
func (f *Forwarder) askList(r *http.Request, n store.Node) ([]json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(r.Context(), listTimeout)
	defer cancel()
	// #nosec G704 -- the address is a registered node's, from the shared store, not the client's
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.Address+r.URL.RequestURI(), nil)
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"Authorization", "X-API-Key", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Host = r.Host
	req.Header.Set(HeaderNodeAuth, f.sign(http.MethodGet, r.URL.RequestURI(), clientIP(r.RemoteAddr)))
	res, err := f.client.Do(req) // #nosec G704 -- a registered node's address (see above)
	if err != nil {
		// Without the URL: its query is the client's, and may carry a
		// (spent) ticket; the log names the node.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return nil, &statusError{res.StatusCode}
	}
	var env struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxListBody)).Decode(&env); err != nil {
		return nil, err
	}
	return env.Data, nil
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "answered " + strconv.Itoa(e.code) }

// sortByCreated orders list items oldest first, as one node lists them.
func sortByCreated(items []json.RawMessage) {
	created := make(map[int]time.Time, len(items))
	idx := make([]int, len(items))
	for i, it := range items {
		var v struct {
			Created time.Time `json:"created"`
		}
		_ = json.Unmarshal(it, &v)
		created[i], idx[i] = v.Created, i
	}
	sort.SliceStable(idx, func(a, b int) bool { return created[idx[a]].Before(created[idx[b]]) })
	sorted := make([]json.RawMessage, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
}

func copyAnswer(w http.ResponseWriter, c *capture) {
	for k, v := range c.header {
		w.Header()[k] = v
	}
	if c.status == 0 {
		c.status = http.StatusOK
	}
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body.Bytes())
}
