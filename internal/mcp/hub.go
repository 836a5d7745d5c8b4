package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Session bounds, with their reasons.
const (
	// DefaultMaxSessions caps open MCP sessions on the server: each holds
	// goroutines, a stream and its pending messages.
	DefaultMaxSessions = 256
	// DefaultMaxSessionsPerKey caps one key's sessions, so a client that
	// leaks sessions exhausts its own share, not the server's.
	DefaultMaxSessionsPerKey = 16
	// DefaultIdleTimeout closes a session that sent no request for this
	// long (clients that vanish without DELETE would otherwise hold their
	// slot forever); a client that reconnects initializes a new one.
	DefaultIdleTimeout = 30 * time.Minute
	// maxOpening caps session-opening requests in flight (their sessions
	// are not counted until initialized).
	maxOpening = 32
	// maxWarnedNames bounds the set of skipped tool names already logged.
	maxWarnedNames = 1024
)

// sessionHeader is the streamable HTTP session header.
const sessionHeader = "Mcp-Session-Id"

// Options configures a Hub.
type Options struct {
	// Dispatcher holds the tools; every call goes through it.
	Dispatcher *dispatch.Dispatcher
	Logger     *slog.Logger
	// Version is reported as the server's version.
	Version string
	// MaxBody caps one request body (the API's JSON body cap).
	MaxBody int64
	// Visible reports whether c may see t in tools/list. Default:
	// t.CallableBy(c), as the dispatcher decides (roles; a custom tool's
	// owner or publication). The dispatcher still decides every call.
	Visible func(c auth.Caller, t *dispatch.Tool) bool
	// WriteError answers a refused HTTP request (the API's envelope);
	// default: plain text with the public message.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// Session bounds; zero means the Default* constant.
	MaxSessions       int
	MaxSessionsPerKey int
	IdleTimeout       time.Duration
}

// Hub serves MCP over streamable HTTP: one MCP server per key (its tool
// list filtered for the key's role), sessions bound to the key that opened
// them, and tool lists that follow the dispatcher's registry.
type Hub struct {
	d        *dispatch.Dispatcher
	log      *slog.Logger
	version  string
	visible  func(c auth.Caller, t *dispatch.Tool) bool
	writeErr func(w http.ResponseWriter, r *http.Request, err error)
	maxAll   int
	maxKey   int
	handler  *sdk.StreamableHTTPHandler

	// syncMu serializes tool-list updates (OnChange runs each
	// notification in its own goroutine) and guards every keyServer's
	// tools and warned.
	syncMu sync.Mutex
	warned map[string]bool

	// mu guards the fields below.
	mu      sync.Mutex
	keys    map[serverKey]*keyServer
	revoked map[string]bool
	opening int // session-opening POSTs in flight
	closed  bool
	// hooked are the http.Servers whose Shutdown closes the sessions.
	hooked map[*http.Server]bool
}

// serverKey names a key's server for one scope: the sandbox of the URL
// (/sandboxes/{id}/mcp), or "" for /mcp (the key's default sandbox).
type serverKey struct{ key, scope string }

// keyServer is one key's MCP server for one scope.
type keyServer struct {
	caller auth.Caller
	// scope is the sandbox its calls that name none act on (sandbox.
	// WithScope); "": the key's default sandbox.
	scope string
	srv   *sdk.Server
	// tools maps MCP names to the signature of what is registered under
	// them; guarded by Hub.syncMu.
	tools map[string]string
}

// New returns a Hub and subscribes it to the dispatcher's changes.
func New(o Options) *Hub {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	h := &Hub{
		d: o.Dispatcher, log: o.Logger, version: o.Version, visible: o.Visible, writeErr: o.WriteError,
		maxAll: o.MaxSessions, maxKey: o.MaxSessionsPerKey,
		warned: map[string]bool{}, keys: map[serverKey]*keyServer{}, revoked: map[string]bool{},
		hooked: map[*http.Server]bool{},
	}
	if h.visible == nil {
		h.visible = callable
	}
	if h.writeErr == nil {
		h.writeErr = func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fault.Public(err), statusOf(err))
		}
	}
	if h.maxAll <= 0 {
		h.maxAll = DefaultMaxSessions
	}
	if h.maxKey <= 0 {
		h.maxKey = DefaultMaxSessionsPerKey
	}
	idle := o.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	h.handler = sdk.NewStreamableHTTPHandler(h.serverFor, &sdk.StreamableHTTPOptions{
		Logger:              o.Logger,
		SessionTimeout:      idle,
		MaxRequestBodyBytes: o.MaxBody,
	})
	h.d.OnChange(h.sync)
	return h
}

// callable is the default visibility: what the dispatcher would let c
// call (its roles, and a custom tool's owner or publication).
func callable(c auth.Caller, t *dispatch.Tool) bool { return t.CallableBy(c) }

func statusOf(err error) int {
	switch fault.KindOf(err) {
	case fault.NotFound:
		return http.StatusNotFound
	case fault.RateLimited:
		return http.StatusTooManyRequests
	case fault.Unauthorized:
		return http.StatusUnauthorized
	case fault.Unavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadRequest
	}
}

// ServeHTTP serves /mcp. The request must carry an authenticated caller
// (the API's auth middleware runs first).
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := auth.CallerFrom(r.Context())
	if !ok {
		h.writeErr(w, r, fault.New(fault.Unauthorized, "authentication required"))
		return
	}
	h.hookShutdown(r)
	scope := sandbox.ScopeFrom(r.Context())
	if sid := r.Header.Get(sessionHeader); sid != "" {
		// A session belongs to the key that opened it, at the URL it was
		// opened at; to any other key or URL it does not exist.
		if !h.owns(serverKey{c.KeyID, scope}, sid) {
			h.writeErr(w, r, fault.New(fault.NotFound, "session not found"))
			return
		}
		if r.Method == http.MethodGet {
			// The standalone stream lives as long as the session (idle
			// timeout, DELETE, revocation), not the server's per-request
			// deadlines.
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Time{})
			_ = rc.SetWriteDeadline(time.Time{})
		}
		h.handler.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		h.handler.ServeHTTP(w, r) // the SDK explains what is missing
		return
	}
	// A POST without a session id opens a session: reserve a slot.
	ks, err := h.reserve(c, scope)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	defer h.release(ks)
	h.handler.ServeHTTP(w, r)
}

// hookShutdown makes the serving http.Server's Shutdown close every
// session: a session's event stream (GET) is an active connection that
// Shutdown would otherwise wait on until its own deadline.
func (h *Hub) hookShutdown(r *http.Request) {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv == nil {
		return
	}
	h.mu.Lock()
	if h.hooked[srv] {
		h.mu.Unlock()
		return
	}
	h.hooked[srv] = true
	h.mu.Unlock()
	srv.RegisterOnShutdown(h.Close)
}

// serverFor is the SDK's getServer: the caller's MCP server, created on
// first use with its tool list.
func (h *Hub) serverFor(r *http.Request) *sdk.Server {
	c, ok := auth.CallerFrom(r.Context())
	if !ok {
		return nil
	}
	ks, err := h.keyServer(c, sandbox.ScopeFrom(r.Context()))
	if err != nil {
		return nil
	}
	return ks.srv
}

// keyServer returns c's server for scope, creating it (with its tools) if
// needed. Lock order: syncMu before mu, so a server is listed in keys
// before any later registry change is synced.
func (h *Hub) keyServer(c auth.Caller, scope string) (*keyServer, error) {
	sk := serverKey{c.KeyID, scope}
	if ks, err := h.lookupKey(sk); ks != nil || err != nil {
		return ks, err
	}
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	if ks, err := h.lookupKey(sk); ks != nil || err != nil {
		return ks, err // a concurrent request created it first
	}
	ks := &keyServer{caller: c, scope: scope, tools: map[string]string{}}
	ks.srv = sdk.NewServer(&sdk.Implementation{Name: "sandhold", Title: "sandhold", Version: h.version}, &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       h.log,
		// Tools (with list_changed) even while the role has none; no
		// logging capability.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
		InitializedHandler: func(_ context.Context, req *sdk.InitializedRequest) {
			h.enforceCaps(ks, req.Session)
		},
	})
	h.syncKey(ks, h.table())
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.refusedLocked(c.KeyID); err != nil {
		return nil, err
	}
	h.keys[sk] = ks
	return ks, nil
}

// lookupKey returns sk's server if it exists, or why it may not.
func (h *Hub) lookupKey(sk serverKey) (*keyServer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.refusedLocked(sk.key); err != nil {
		return nil, err
	}
	return h.keys[sk], nil
}

// refusedLocked says why keyID may not have sessions. Callers hold mu.
func (h *Hub) refusedLocked(keyID string) error {
	if h.closed {
		return fault.New(fault.Unavailable, "the server is shutting down")
	}
	if h.revoked[keyID] {
		return fault.New(fault.Unauthorized, "the key was revoked")
	}
	return nil
}

const instructions = "sandhold: secure Linux sandboxes. Tool names are sandhold's with dots written as underscores " +
	"(exec_run is exec.run); tools that keys defined are custom_<name>, never a built-in's name. The sandbox_* tools without a dotted counterpart follow AIO Sandbox's MCP tools and act on " +
	"your default sandbox (created on first use). Every call is authorized, rate limited, risk-rated and audited."

// reserve checks the caps before a session opens. It counts initialized
// sessions: the client's next request may arrive before this POST's
// handler returns, so a reservation held until then would refuse it.
// Bursts are bounded by maxOpening here and by enforceCaps once the
// session is initialized.
func (h *Hub) reserve(c auth.Caller, scope string) (*keyServer, error) {
	ks, err := h.keyServer(c, scope)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.overLocked(ks, 0); err != nil {
		return nil, err
	}
	if h.opening >= maxOpening {
		return nil, fault.New(fault.Unavailable, "too many MCP sessions are opening; retry later")
	}
	h.opening++
	return ks, nil
}

func (h *Hub) release(*keyServer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opening--
}

// overLocked refuses when ks's key, or the server, has more than slack
// sessions beyond its cap reached. Callers hold mu.
func (h *Hub) overLocked(ks *keyServer, slack int) error {
	total, mine := 0, 0
	for sk, k := range h.keys {
		n := count(k.srv)
		total += n
		if sk.key == ks.caller.KeyID {
			mine += n // every scope of the key
		}
	}
	if total >= h.maxAll+slack {
		return fault.Errorf(fault.Unavailable, "the server has %d open MCP sessions, its limit; retry later", total)
	}
	if mine >= h.maxKey+slack {
		return fault.WithRetryAfter(fault.RateLimited, 60,
			"this key has too many open MCP sessions; close one (DELETE /mcp) or let idle ones expire")
	}
	return nil
}

// enforceCaps runs when a session finishes initializing: one that took a
// key or the server past its cap (concurrent opens) is closed at once.
func (h *Hub) enforceCaps(ks *keyServer, ss *sdk.ServerSession) {
	h.mu.Lock()
	err := h.overLocked(ks, 1)
	h.mu.Unlock()
	if err != nil {
		h.log.Warn("mcp: session over the cap closed", "key_id", ks.caller.KeyID, "reason", fault.Public(err))
		go func() { _ = ss.Close() }()
	}
}

// count is s's initialized sessions. A session whose first POST is in
// flight is counted as pending; one that never initialized (a probe such
// as server/discover, refused by this stateful server) is closed by the
// SDK when that POST ends and is not counted while it goes.
func count(s *sdk.Server) int {
	n := 0
	for ss := range s.Sessions() {
		if ss.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// owns reports whether session sid is one of sk's.
func (h *Hub) owns(sk serverKey, sid string) bool {
	h.mu.Lock()
	ks := h.keys[sk]
	h.mu.Unlock()
	if ks == nil {
		return false
	}
	for ss := range ks.srv.Sessions() {
		if ss.ID() == sid {
			return true
		}
	}
	return false
}

// Sessions is the number of open sessions (all keys).
func (h *Hub) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, k := range h.keys {
		n += count(k.srv)
	}
	return n
}

// Revoke ends keyID's sessions and refuses new ones (auth.Service.OnRevoke;
// it does not block).
func (h *Hub) Revoke(keyID string) {
	h.mu.Lock()
	var gone []*keyServer
	for sk, ks := range h.keys {
		if sk.key == keyID {
			gone = append(gone, ks)
			delete(h.keys, sk)
		}
	}
	h.revoked[keyID] = true
	h.mu.Unlock()
	for _, ks := range gone {
		go closeAll(ks.srv)
	}
}

// Close ends every session; later requests are refused.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	keys := h.keys
	h.keys = map[serverKey]*keyServer{}
	h.mu.Unlock()
	for _, ks := range keys {
		closeAll(ks.srv)
	}
}

func closeAll(s *sdk.Server) {
	for ss := range s.Sessions() {
		_ = ss.Close()
	}
}

// entry is one tool as a key's server lists it.
type entry struct {
	tool *sdk.Tool
	// sig identifies what the tool is, to re-register only on change.
	sig     string
	handler func(ks *keyServer) sdk.ToolHandler
}

// registry is the dispatcher's tools for one sync.
type registry struct {
	tools  []*dispatch.Tool          // every tool, by name
	byName map[string]*dispatch.Tool // every tool by dispatcher name
}

// table reads the dispatcher's tools. Callers hold syncMu.
func (h *Hub) table() registry {
	tools := h.d.Tools()
	byName := make(map[string]*dispatch.Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	return registry{tools: tools, byName: byName}
}

// warnSkipped logs tools left out of a caller's list, once each. Callers
// hold syncMu.
func (h *Hub) warnSkipped(skipped []string) {
	for _, n := range skipped {
		if h.warned[n] {
			continue
		}
		if len(h.warned) >= maxWarnedNames {
			clear(h.warned)
		}
		h.warned[n] = true
		h.log.Warn("mcp: tool left out: its MCP name is taken", "tool", n)
	}
}

// sync brings every key's tool list up to date with the registry.
func (h *Hub) sync() {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	reg := h.table()
	h.mu.Lock()
	keys := make([]*keyServer, 0, len(h.keys))
	for _, ks := range h.keys {
		keys = append(keys, ks)
	}
	h.mu.Unlock()
	for _, ks := range keys {
		h.syncKey(ks, reg)
	}
}

// syncKey updates one server: the SDK sends tools/list_changed to its
// sessions when something was added or removed. Callers hold syncMu.
func (h *Hub) syncKey(ks *keyServer, reg registry) {
	want := h.entries(ks.caller, reg)
	var gone []string
	for name := range ks.tools {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		ks.srv.RemoveTools(gone...)
		for _, n := range gone {
			delete(ks.tools, n)
		}
	}
	for name, e := range want {
		if ks.tools[name] == e.sig {
			continue
		}
		ks.srv.AddTool(e.tool, e.handler(ks))
		ks.tools[name] = e.sig
	}
}

// entries is what c's server should list: the dispatcher tools c may call,
// named from c's own table (never claimed for everyone: another key's
// tools cannot take a name in c's list), and the aliases whose targets c
// may call.
func (h *Hub) entries(c auth.Caller, reg registry) map[string]entry {
	visible := make([]*dispatch.Tool, 0, len(reg.tools))
	for _, t := range reg.tools {
		if h.visible(c, t) {
			visible = append(visible, t)
		}
	}
	byMCP, skipped := nameTable(visible, aliasNames())
	h.warnSkipped(skipped)
	out := make(map[string]entry, len(byMCP)+len(aliases))
	for name, t := range byMCP {
		out[name] = h.toolEntry(name, t)
	}
	for _, a := range aliases {
		if e, ok := h.aliasEntry(c, a, reg); ok {
			out[a.name] = e
		}
	}
	return out
}

// toolEntry lists dispatcher tool t under name; calls go to Dispatcher.Call.
func (h *Hub) toolEntry(name string, t *dispatch.Tool) entry {
	schema := objectSchema(t.InputSchema)
	// The risk as GET /v1/tools lists it: a tool whose risk is decided per
	// call (exec.run) is "dynamic" with its ceiling, never its safe floor.
	lr := t.Listed()
	meta := sdk.Meta{"sandhold/tool": t.Name, "sandhold/risk": lr.Risk}
	if lr.Ceiling != "" {
		meta["sandhold/risk_floor"], meta["sandhold/risk_ceiling"] = lr.Floor, lr.Ceiling
	}
	tool := &sdk.Tool{
		Name:        name,
		Title:       t.Name,
		Description: describe(t),
		InputSchema: schema,
		Meta:        meta,
	}
	target := t.Name
	return entry{
		tool: tool,
		sig:  "tool\x00" + t.Name + "\x00" + strconv.FormatBool(t.Custom) + "\x00" + tool.Description + "\x00" + string(schema) + "\x00" + lr.Risk + lr.Ceiling,
		handler: func(ks *keyServer) sdk.ToolHandler {
			return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				c, err := h.callerOf(ctx, ks)
				if err != nil {
					return errorResult(fault.Public(err)), nil
				}
				return toResult(h.d.Call(sandbox.WithScope(ctx, ks.scope), c, target, args(req))), nil
			}
		},
	}
}

// describe is t's description naming its dotted name. No risk tier in the
// text: the declared one is a floor the guard and custom-tool derivation
// raise per call (exec.run is declared safe), so printing it would mislead;
// the listed risk is in _meta ("sandhold/risk", "dynamic" with
// "sandhold/risk_ceiling" for per-call tools).
func describe(t *dispatch.Tool) string {
	d := t.Description
	if d == "" {
		d = t.Name
	}
	if t.Custom {
		return d + " (custom tool " + t.Name + ", defined by a key, not built into sandhold)"
	}
	return d + " (sandhold tool " + t.Name + ")"
}

// objectSchema returns s when it is a JSON object schema of type
// "object", else the schema of any object (the SDK requires one; the
// dispatcher's Decode still checks the arguments). Top-level keywords set
// to null ("required": null from a nil slice) are dropped: strict clients
// (the TypeScript SDK) reject the whole tool list over one of them.
func objectSchema(s json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if len(s) == 0 || json.Unmarshal(s, &m) != nil || string(m["type"]) != `"object"` {
		return json.RawMessage(`{"type":"object"}`)
	}
	clean := true
	for k, v := range m {
		if string(v) == "null" {
			delete(m, k)
			clean = false
		}
	}
	if clean {
		return s
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

// args returns the call's raw arguments ({} when absent).
func args(req *sdk.CallToolRequest) json.RawMessage {
	if req.Params == nil || len(req.Params.Arguments) == 0 || string(req.Params.Arguments) == "null" {
		return json.RawMessage("{}")
	}
	return req.Params.Arguments
}

// callerOf is the caller of a call on ks: the authenticated caller of the
// session's requests, which must be ks's key.
func (h *Hub) callerOf(ctx context.Context, ks *keyServer) (auth.Caller, error) {
	c, ok := auth.CallerFrom(ctx)
	if !ok {
		c = ks.caller
	}
	if c.KeyID != ks.caller.KeyID {
		return auth.Caller{}, fault.New(fault.Forbidden, "the session belongs to another key")
	}
	h.mu.Lock()
	revoked, closed := h.revoked[c.KeyID], h.closed
	h.mu.Unlock()
	if revoked || closed {
		return auth.Caller{}, fault.New(fault.Unauthorized, "the key's sessions are closed")
	}
	return c, nil
}
