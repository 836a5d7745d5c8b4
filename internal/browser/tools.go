package browser

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Tool names of the relays: each opens one connection into a sandbox for
// an HTTP edge (the /sandboxes/{id}/cdp, /vnc and /proxy routes), so the
// dispatcher's checks — role, HALT, policy, rate limit, audit — apply to
// every connection exactly as to any other call.
var (
	ToolCDP     = dispatch.Ref[ConnectArgs, *Relay]("browser.cdp")
	ToolVNC     = dispatch.Ref[ConnectArgs, *Relay]("browser.vnc")
	ToolPreview = dispatch.Ref[PreviewArgs, *Relay]("preview.connect")
)

// ConnectArgs name the sandbox whose browser to reach ("" = the caller's
// default sandbox).
type ConnectArgs struct {
	dispatch.On
	// Path is what the client asked for below the relay's prefix, for the
	// audit record (no query string).
	Path string `json:"path,omitempty" doc:"the path relayed (audit only)" maxLength:"2048"`
}

// PreviewArgs name a port of a sandbox's own loopback.
type PreviewArgs struct {
	dispatch.On
	Port      int    `json:"port" required:"true" minimum:"1" maximum:"65535" doc:"a preview port (SANDBOX_PREVIEW_PORTS)"`
	Method    string `json:"method,omitempty" doc:"the HTTP method relayed" maxLength:"16"`
	Path      string `json:"path,omitempty" doc:"the path relayed (audit only)" maxLength:"2048"`
	WebSocket bool   `json:"websocket,omitempty" doc:"a WebSocket upgrade"`
}

// Validate bounds the port.
func (a PreviewArgs) Validate() error {
	if a.Port < 1 || a.Port > 65535 {
		return fault.InvalidField("body.port", "port must be within 1-65535")
	}
	return nil
}

// devToolsPath reports whether p is one of DevTools' endpoints: the HTTP
// ones (/json, /json/version, /json/list, /json/new, …) and the
// WebSockets (/devtools/browser/…, /devtools/page/…).
func devToolsPath(p string) bool {
	return p == "/json" || strings.HasPrefix(p, "/json/") || strings.HasPrefix(p, "/devtools/")
}

// Relay is one connection into a sandbox, opened by a relay tool. The
// edge that asked for it owns it and must Close it.
type Relay struct {
	net.Conn `json:"-"`
	Sandbox  string `json:"sandbox"`
	Port     int    `json:"port"`
	// redial opens a fresh connection to the same port, for a request
	// that may be replayed (nil: the relay cannot redial).
	redial func(context.Context) (net.Conn, error)
	// mu guards Conn once the relay is shared (Redial, Close) and closed.
	mu     sync.Mutex
	closed bool
}

// errRelayClosed is a redial after the relay was closed (revoked, HALT).
var errRelayClosed = errors.New("relay closed")

// Redial replaces the relay's connection with a fresh one to the same
// port, closing the old one, so the edge can retry a request that failed
// before any answer (DevTools may reset a connection while it starts).
// A relay that was closed stays closed.
func (r *Relay) Redial(ctx context.Context) (net.Conn, error) {
	if r.redial == nil {
		return nil, errors.New("this relay cannot redial")
	}
	conn, err := r.redial(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = conn.Close()
		return nil, errRelayClosed
	}
	old := r.Conn
	r.Conn = conn
	r.mu.Unlock()
	_ = old.Close()
	return conn, nil
}

// Close closes the relay's current connection; a later Redial fails.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	conn := r.Conn
	r.mu.Unlock()
	return conn.Close()
}

type edgeKey struct{}

// WithEdge marks ctx as an HTTP edge that will serve the connection a
// relay tool returns. Without the mark the tools refuse: a connection
// returned to POST /v1/tools/call or MCP would only leak.
func WithEdge(ctx context.Context) context.Context { return context.WithValue(ctx, edgeKey{}, true) }

func isEdge(ctx context.Context) bool { v, _ := ctx.Value(edgeKey{}).(bool); return v }

var errNotEdge = fault.New(fault.Invalid, "this tool opens a connection for an HTTP route (/sandboxes/{id}/cdp, /vnc/websockify, /proxy/{port}/); it cannot be called directly")

// Tools are the relay tools. preview are the ports the preview proxy may
// reach (SANDBOX_PREVIEW_PORTS).
func Tools(m *Manager, preview []uint16) []dispatch.Tool {
	var ts []dispatch.Tool
	target := func(id string, port int, detail map[string]any) dispatch.Target {
		return dispatch.Target{Sandbox: id, Target: "port " + strconv.Itoa(port), Detail: detail}
	}
	// Raw DevTools is full control of the browser (any page, any script):
	// the top tier, like evaluating arbitrary code. A connection counts
	// once against the browser rate limit, however long it lasts.
	ts = append(ts, dispatch.Define(ToolCDP, dispatch.Spec{
		Description: "Open a DevTools (CDP) connection to the sandbox's browser, starting it on first use (HTTP route /sandboxes/{id}/cdp/)",
		Risk:        guard.Dangerous, Category: ratelimit.Browser,
	}, func(ctx context.Context, c auth.Caller, a ConnectArgs) (*Relay, error) {
		if !isEdge(ctx) {
			return nil, errNotEdge
		}
		if !devToolsPath(a.Path) {
			return nil, fault.New(fault.NotFound, "DevTools serves /json/… and /devtools/… only")
		}
		conn, err := m.DevTools(ctx, c, a.Sandbox)
		if err != nil {
			return nil, err
		}
		redial := func(ctx context.Context) (net.Conn, error) { return m.DevTools(ctx, c, a.Sandbox) }
		return &Relay{Conn: conn, Sandbox: a.Sandbox, Port: sandbox.DevToolsPort, redial: redial}, nil
	}, dispatch.Hooks[ConnectArgs, *Relay]{
		Describe: func(a ConnectArgs) dispatch.Target {
			return target(a.Sandbox, sandbox.DevToolsPort, map[string]any{"path": a.Path})
		},
	}))
	// The desktop: watching and typing into the browser's screen.
	ts = append(ts, dispatch.Define(ToolVNC, dispatch.Spec{
		Description: "Open a connection to the sandbox's desktop VNC server (HTTP route /sandboxes/{id}/vnc/websockify)",
		Risk:        guard.Medium, Category: ratelimit.Browser,
	}, func(ctx context.Context, c auth.Caller, a ConnectArgs) (*Relay, error) {
		if !isEdge(ctx) {
			return nil, errNotEdge
		}
		conn, err := m.VNC(ctx, c, a.Sandbox)
		if err != nil {
			return nil, err
		}
		return &Relay{Conn: conn, Sandbox: a.Sandbox, Port: sandbox.VNCPort}, nil
	}, dispatch.Hooks[ConnectArgs, *Relay]{
		Describe: func(a ConnectArgs) dispatch.Target { return target(a.Sandbox, sandbox.VNCPort, nil) },
	}))
	// The preview of a sandbox's own web server: reading what it serves
	// is safe; other methods act on it (medium). Each request counts as a
	// file operation (it reads what the sandbox serves), a WebSocket once.
	ts = append(ts, dispatch.Define(ToolPreview, dispatch.Spec{
		Description: "Open a connection to a web server listening on a preview port of the sandbox's own loopback (HTTP route /sandboxes/{id}/proxy/{port}/)",
		Risk:        guard.Safe, RiskCeiling: guard.Medium, Category: ratelimit.File,
	}, func(ctx context.Context, c auth.Caller, a PreviewArgs) (*Relay, error) {
		if !isEdge(ctx) {
			return nil, errNotEdge
		}
		if !slices.Contains(preview, uint16(a.Port)) { //nolint:gosec // G115: Validate bounds the port to 1-65535
			return nil, fault.Errorf(fault.Forbidden, "port %d is not a preview port (SANDBOX_PREVIEW_PORTS)", a.Port)
		}
		s, err := m.sb.Resolve(ctx, c, a.Sandbox)
		if err != nil {
			return nil, err
		}
		conn, err := dialStarting(ctx, s, a.Port)
		if err != nil {
			return nil, err
		}
		return &Relay{Conn: conn, Sandbox: s.ID(), Port: a.Port}, nil
	}, dispatch.Hooks[PreviewArgs, *Relay]{
		Assess: func(a PreviewArgs) dispatch.Assessment {
			switch a.Method {
			case "", "GET", "HEAD", "OPTIONS":
				return dispatch.Assessment{Risk: guard.Safe}
			}
			return dispatch.Assessment{Risk: guard.Medium}
		},
		Describe: func(a PreviewArgs) dispatch.Target {
			return target(a.Sandbox, a.Port, map[string]any{"method": a.Method, "path": a.Path, "websocket": a.WebSocket})
		},
	}))
	ts = append(ts, recordTool(m))
	return ts
}

// previewStartWait is how long a preview waits for a server that is not
// listening yet: an agent starts a dev server in the background and
// shows its URL at once.
const previewStartWait = 3 * time.Second

// dialStarting dials port, retrying while nothing listens there, up to
// previewStartWait.
func dialStarting(ctx context.Context, s *sandbox.Sandbox, port int) (net.Conn, error) {
	deadline := time.Now().Add(previewStartWait)
	for {
		conn, err := s.DialPort(ctx, port)
		if err == nil || !fault.Is(err, fault.Unavailable) || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Relays are the open relayed sessions by key, so revoking a key closes
// its DevTools, desktop and preview WebSockets at once.
type Relays struct {
	// mu guards byKey.
	mu    sync.Mutex
	byKey map[string]map[*Relay]struct{}
}

// Track registers r as held by key; the returned func forgets it.
func (rs *Relays) Track(key string, r *Relay) (forget func()) {
	rs.mu.Lock()
	if rs.byKey == nil {
		rs.byKey = make(map[string]map[*Relay]struct{})
	}
	set := rs.byKey[key]
	if set == nil {
		set = make(map[*Relay]struct{})
		rs.byKey[key] = set
	}
	set[r] = struct{}{}
	rs.mu.Unlock()
	return func() {
		rs.mu.Lock()
		delete(set, r)
		if len(set) == 0 && rs.byKey[key] != nil && len(rs.byKey[key]) == 0 {
			delete(rs.byKey, key)
		}
		// After a Revoke the set is no longer in byKey; deleting from
		// it under mu is still safe.
		rs.mu.Unlock()
	}
}

// Revoke closes every relay key holds (the daemon's revocation hook).
func (rs *Relays) Revoke(key string) {
	rs.mu.Lock()
	set := rs.byKey[key]
	delete(rs.byKey, key)
	open := make([]*Relay, 0, len(set))
	for r := range set {
		open = append(open, r)
	}
	rs.mu.Unlock()
	for _, r := range open {
		_ = r.Close()
	}
}

// Open is how many relays are open (tests).
func (rs *Relays) Open() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, s := range rs.byKey {
		n += len(s)
	}
	return n
}
