package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/browser"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
)

// Reaching into a sandbox over HTTP: the preview proxy of its own web
// servers (/proxy/{port}/, /absproxy/{port}/), its browser's DevTools
// (/cdp/) and its desktop's VNC server (/vnc/websockify).
//
// Every request (every WebSocket: once) is authenticated by the
// middleware (key header or one-time ticket), then opens its connection
// through the dispatcher (preview.connect, browser.cdp, browser.vnc): the
// role, HALT, policy and rate limit apply and the call is audited, and the
// sandbox lookup is owner-scoped (another key's sandbox is 404). The
// connection itself comes from the sandbox's init (sandbox.DialPort): the
// sandbox keeps its network namespace with only lo.
//
// A WebSocket relay ends when either side closes, when the sandbox pauses
// (an owner's pause or the operator's HALT) or stops, and when its key is
// revoked (Relays.Revoke); its end is audited with its duration.

// Caps and timeouts with their reasons.
const (
	// maxJSONRewrite caps a DevTools /json answer read to rewrite its URLs
	// (a page list is a few KiB per tab).
	maxJSONRewrite = 4 << 20
	// vncIdle closes a desktop session nobody has typed into or watched
	// for this long: an abandoned noVNC tab should not hold the relay.
	vncIdle = 10 * time.Minute
	// relayHeaderTimeout bounds the wait for a relayed server's response
	// headers (a hung dev server must not hold a request forever).
	relayHeaderTimeout = 60 * time.Second
)

// credentialHeaders never reach a sandbox: the key authenticated the
// request here and is no business of the sandbox's servers.
var credentialHeaders = []string{"Authorization", "X-API-Key", "X-AIO-API-Key", "Cookie", "Proxy-Authorization"}

// unsafeResponseHeaders never leave a preview: the proxied page shares
// this server's origin, and these would let it act beyond its own path —
// a service worker claiming the whole origin (the console included), or
// wiping the origin's storage.
var unsafeResponseHeaders = []string{"Service-Worker-Allowed", "Clear-Site-Data"}

// previewSandbox puts every preview page in an opaque origin of its own
// (a CSP sandbox without allow-same-origin): the page shares this server's
// host, and the web console signs people in with a cookie, so a page the
// sandbox serves must not act as this origin — read the API with a
// signed-in person's session, or reach the console's storage. Scripts,
// forms and popups still work; a page's own cookies and localStorage do
// not here (on a content host {port}-{id}.<domain> the page has an origin
// of its own: content.go).
const previewSandbox = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads allow-pointer-lock"

// Relays serves the relay routes; Revoke is the daemon's revocation hook.
type Relays struct {
	s      *api.Server
	d      *dispatch.Dispatcher
	audit  *audit.Log
	log    *slog.Logger
	relays browser.Relays
}

// Routes mounts the preview proxy, the DevTools relay and the VNC relay on
// both origins: the path forms on the console's origin (for API clients
// with keys and tickets) and on the content listener, and the content
// hosts (the server's content origin serves them: api.HostRelays). Their
// ends are audited in lg. Call before serving.
func Routes(s *api.Server, d *dispatch.Dispatcher, lg *audit.Log, log *slog.Logger) *Relays {
	h := &Relays{s: s, d: d, audit: lg, log: log}
	s.UseHostRelays(h)
	for _, r := range []chi.Router{s.Router(), s.ContentRouter()} {
		h.mount(r, r == s.Router())
	}
	document(s.API().OpenAPI())
	return h
}

// mount adds the relay routes to r; first (the console's router) also
// tells the server which patterns are relays.
func (h *Relays) mount(r chi.Router, first bool) {
	s := h.s
	relay := func(pattern string) {
		if first {
			s.RelayRoute(pattern, false)
		}
	}
	for _, prefix := range []string{"", "/sandboxes/{id}"} {
		for _, kind := range []string{"proxy", "absproxy"} {
			pattern := prefix + "/" + kind + "/{port}/*"
			// The methods a web app uses; CONNECT and TRACE are not relayed.
			for _, m := range previewMethods {
				r.MethodFunc(m, pattern, h.preview(kind == "absproxy"))
			}
			r.Get(prefix+"/"+kind+"/{port}", h.slash)
			r.Head(prefix+"/"+kind+"/{port}", h.slash)
			if first {
				s.RelayRoute(pattern, true)
			}
			relay(prefix + "/" + kind + "/{port}")
		}
	}
	r.Get("/sandboxes/{id}/cdp/*", h.cdp)
	r.Put("/sandboxes/{id}/cdp/*", h.cdp)
	r.Get("/sandboxes/{id}/vnc/websockify", h.vnc)
	relay("/sandboxes/{id}/cdp/*")
	relay("/sandboxes/{id}/vnc/websockify")
}

// previewMethods are the methods the preview proxy relays.
var previewMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// document lists the relay routes in /openapi.json. Their bodies are
// whatever the sandbox's server, DevTools or x11vnc speak, so only the
// route, its parameters and its refusals are described.
func document(oa *huma.OpenAPI) {
	str := &huma.Schema{Type: "string"}
	param := func(name, doc string) *huma.Param {
		return &huma.Param{Name: name, In: "path", Required: true, Schema: str, Description: doc}
	}
	refusals := map[string]*huma.Response{
		"401": {Description: "no key or ticket of the route's scope (the console's session cookie is never taken on a relay)"},
		"403": {Description: "a port outside SANDBOX_PREVIEW_PORTS, the caller's role, or policy"},
		"404": {Description: "no such sandbox for this key"},
		"429": {Description: "rate limited"},
	}
	with := func(ok string) map[string]*huma.Response {
		r := map[string]*huma.Response{"200": {Description: ok}}
		for k, v := range refusals {
			r[k] = v
		}
		return r
	}
	for _, prefix := range []string{"", "/sandboxes/{id}"} {
		for _, kind := range []string{"proxy", "absproxy"} {
			params := []*huma.Param{param("port", "a port on the sandbox's own loopback (SANDBOX_PREVIEW_PORTS)")}
			where := "the caller's default sandbox"
			if prefix != "" {
				params = append([]*huma.Param{param("id", "sandbox id")}, params...)
				where = "the sandbox"
			}
			strip := "with the prefix removed"
			if kind == "absproxy" {
				strip = "with the whole path kept"
			}
			for _, m := range previewMethods {
				if m == http.MethodHead || m == http.MethodOptions {
					continue
				}
				oa.AddOperation(&huma.Operation{
					OperationID: "preview-" + kind + "-" + strings.ToLower(m) + map[bool]string{true: "-in-sandbox"}[prefix != ""],
					Method:      m, Path: prefix + "/" + kind + "/{port}", Tags: []string{"preview"}, Security: api.Security,
					Summary: "Preview proxy: HTTP and WebSocket to a server listening in " + where + " (and every path below)",
					Description: "Relayed through the init to 127.0.0.1:{port} inside the sandbox (its network namespace stays empty), " + strip +
						". Keys, cookies and the ticket parameter are stripped before the request reaches the sandbox; answers carry a CSP sandbox policy.",
					Parameters: params, Responses: with("whatever the sandbox's server answers"),
				})
			}
		}
	}
	id := []*huma.Param{param("id", "sandbox id")}
	for _, m := range []string{http.MethodGet, http.MethodPut} {
		oa.AddOperation(&huma.Operation{
			OperationID: "cdp-" + strings.ToLower(m), Method: m, Path: "/sandboxes/{id}/cdp", Tags: []string{"browser"}, Security: api.Security,
			Summary:     "DevTools (CDP) relay to the sandbox's browser: /json/version, /json/list, … and the /devtools/… WebSocket below this path",
			Description: "Starts the sandbox's Chromium on first use. Playwright's connectOverCDP takes this URL (with the key header); Puppeteer's connect takes the webSocketDebuggerUrl of /json/version as browserWSEndpoint (with the key header, or ?ticket=). One connection counts once against the browser rate limit; connect and disconnect are audited; HALT and revocation close it.",
			Parameters:  id, Responses: with("DevTools' JSON, or 101 Switching Protocols"),
		})
	}
	oa.AddOperation(&huma.Operation{
		OperationID: "vnc-websockify", Method: http.MethodGet, Path: "/sandboxes/{id}/vnc/websockify", Tags: []string{"browser"}, Security: api.Security,
		Summary:     "VNC relay (RFB over WebSocket, subprotocol binary) to the sandbox's desktop; the noVNC page at /sandboxes/{id}/vnc/index.html uses it",
		Description: "Authenticated by a one-time ticket (?ticket=) or the key header; starts a headful browser on a virtual display if none runs; idle sessions close after 10 minutes.",
		Parameters:  id, Responses: with("101 Switching Protocols"),
	})
}

// Revoke closes every relay key id holds and ends its content sessions.
func (h *Relays) Revoke(keyID string) {
	h.s.EndContentSessions(keyID)
	h.relays.Revoke(keyID)
}

// CDP serves a content host 9222-{id}: the DevTools relay (api.HostRelays).
func (h *Relays) CDP(w http.ResponseWriter, r *http.Request) { h.cdp(w, r) }

// VNC serves a content host's /websockify: the VNC relay.
func (h *Relays) VNC(w http.ResponseWriter, r *http.Request) { h.vnc(w, r) }

// Preview serves a content host {port}-{id}: the preview with the whole
// path kept (the host is the prefix).
func (h *Relays) Preview(w http.ResponseWriter, r *http.Request) { h.preview(true)(w, r) }

// OpenRelays is how many relays are open (tests).
func (h *Relays) OpenRelays() int { return h.relays.Open() }

// slash sends /proxy/{port} to /proxy/{port}/, so relative links resolve
// below the prefix.
func (h *Relays) slash(w http.ResponseWriter, r *http.Request) {
	u := *r.URL
	u.Path += "/"
	u.RawPath = ""
	http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect) //nolint:gosec // G710: the target is this request's own path plus "/", matched by a route beginning /proxy/, /absproxy/ or /sandboxes/: never another host
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// open calls a relay tool for the request's caller.
func open[A any](h *Relays, r *http.Request, tool dispatch.Ref[A, *browser.Relay], args A) (auth.Caller, *browser.Relay, error) {
	c, err := api.MustCaller(r.Context())
	if err != nil {
		return c, nil, err
	}
	rel, err := tool.Call(browser.WithEdge(r.Context()), h.d, c, args)
	if err != nil {
		return c, nil, err
	}
	if rel == nil || rel.Conn == nil {
		return c, nil, fault.New(fault.Internal, "relay without a connection")
	}
	return c, rel, nil
}

func (h *Relays) preview(abs bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Not a number: 0, which the tool refuses (audited like any
		// other invalid call).
		port, err := strconv.Atoi(chi.URLParam(r, "port"))
		if err != nil {
			port = 0
		}
		id := chi.URLParam(r, "id")
		ws := isWebSocket(r)
		c, rel, err := open(h, r, browser.ToolPreview, browser.PreviewArgs{On: dispatch.On{Sandbox: id}, Port: port, Method: r.Method, Path: r.URL.Path, WebSocket: ws})
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		path := "/" + chi.URLParam(r, "*")
		if abs {
			path = r.URL.Path
		}
		h.relay(w, r, c, rel, "preview", path, "localhost:"+strconv.Itoa(port), nil)
	}
}

// cdp relays DevTools' HTTP endpoints (/json/version, /json/list, …) and
// its WebSockets (/devtools/browser/…, /devtools/page/…), with the URLs in
// /json answers rewritten to point here.
func (h *Relays) cdp(w http.ResponseWriter, r *http.Request) {
	rest := chi.URLParam(r, "*")
	id := chi.URLParam(r, "id")
	if err := cdpPathAllowed(r, rest); err != nil {
		api.WriteError(w, r, err)
		return
	}
	c, rel, err := open(h, r, browser.ToolCDP, browser.ConnectArgs{On: dispatch.On{Sandbox: id}, Path: "/" + rest})
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	scheme := "ws"
	if r.TLS != nil {
		scheme = "wss"
	}
	base := r.Host + "/sandboxes/" + url.PathEscape(id) + "/cdp/"
	if api.OnContentHost(r.Context()) {
		base = r.Host + "/" // the content host 9222-{id} is the prefix
	}
	inside := "127.0.0.1:" + strconv.Itoa(rel.Port)
	rewrite := func(resp *http.Response) error {
		if !isJSONPath(rest) {
			return nil
		}
		// Only JSON passes, never a page a browser would render (issue
		// 29, row 1): the endpoint builds JSON, and this holds should
		// anything else ever answer here.
		if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			_ = resp.Body.Close()
			return &notJSONError{status: resp.StatusCode}
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONRewrite+1))
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		if len(b) > maxJSONRewrite {
			return errors.New("DevTools answer too large to rewrite")
		}
		b = bytes.ReplaceAll(b, []byte("ws://"+inside+"/"), []byte(scheme+"://"+base))
		b = bytes.ReplaceAll(b, []byte(inside+"/"), []byte(base))
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	// The connection is to the server's own DevTools endpoint over the
	// browser's pipe (internal/browser/devtools.go), never a port in the
	// sandbox; it is sent the Host DevTools would expect and no Origin
	// (the request was authenticated here).
	h.relay(w, r, c, rel, "cdp", "/"+rest, inside, rewrite)
}

// isJSONPath: DevTools' HTTP endpoints are /json and /json/….
func isJSONPath(rest string) bool { return rest == "json" || strings.HasPrefix(rest, "json/") }

// cdpPathAllowed admits what a DevTools client needs and nothing else:
// the /json… endpoints, and /devtools/… only as a WebSocket — the DevTools
// front-end's pages are never served, on either origin.
func cdpPathAllowed(r *http.Request, rest string) error {
	switch {
	case isJSONPath(rest):
		return nil
	case strings.HasPrefix(rest, "devtools/"):
		if isWebSocket(r) {
			return nil
		}
		return fault.New(fault.NotFound, "the DevTools front-end is not served; /devtools/… relays the protocol's WebSocket only")
	}
	return fault.New(fault.NotFound, "the DevTools relay serves /json… and the /devtools/… WebSocket")
}

// notJSONError is a DevTools HTTP answer that was not JSON: refused.
type notJSONError struct{ status int }

func (e *notJSONError) Error() string {
	return fmt.Sprintf("DevTools answered %d with a body that is not JSON", e.status)
}

// Content-Security-Policy of relayed answers (beside the answer's own,
// which also applies). sandboxCSP, for DevTools' JSON and anything else
// that is not a page: an opaque origin with nothing allowed.
const sandboxCSP = "sandbox; default-src 'none'; frame-ancestors 'none'"

// previewPolicy is the CSP a preview answer gets: an opaque origin
// (previewSandbox) where the origin is shared — the console's, or the
// content listener's, which every sandbox shares — and its own origin on
// a content host {port}-{id}.<domain>, which serves nothing but that
// preview (content.go).
func previewPolicy(ctx context.Context) string {
	if api.OnContentHost(ctx) {
		return previewSandbox + " allow-same-origin"
	}
	return previewSandbox
}

// relay serves one request (or WebSocket) over rel with a reverse proxy.
func (h *Relays) relay(w http.ResponseWriter, r *http.Request, c auth.Caller, rel *browser.Relay, kind, path, host string, modify func(*http.Response) error) {
	var once sync.Once
	conn := rel.Conn
	closeRel := func() { once.Do(func() { _ = rel.Close() }) }
	defer closeRel()
	forget := h.relays.Track(c.KeyID, rel)
	defer forget()
	started := time.Now()
	ws := isWebSocket(r)
	var dialed atomic.Bool
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if dialed.Swap(true) {
				// A replayed request (replayRelay): a fresh connection.
				return rel.Redial(ctx)
			}
			return conn, nil
		},
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: relayHeaderTimeout,
		// Relayed as the server sent it; a gzip answer stays gzip.
		DisableCompression: true,
	}
	rp := &httputil.ReverseProxy{
		Transport:     replayRelay{tr: tr, log: h.log, kind: kind},
		FlushInterval: -1, // server-sent events and streamed answers pass at once
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			out.URL.Scheme, out.URL.Host = "http", host
			out.URL.Path, out.URL.RawPath = path, ""
			q := out.URL.Query()
			if q.Has(auth.TicketParam) {
				q.Del(auth.TicketParam)
				out.URL.RawQuery = q.Encode()
			}
			out.Host = host
			for _, hd := range credentialHeaders {
				out.Header.Del(hd)
			}
			if kind == "cdp" {
				out.Header.Del("Origin")
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			for _, hd := range unsafeResponseHeaders {
				resp.Header.Del(hd)
			}
			// What the sandbox sent is never sniffed into something else,
			// and never runs with this origin's authority: a CSP sandbox
			// beside any policy of the answer's own (both apply).
			resp.Header.Set("X-Content-Type-Options", "nosniff")
			if kind == "preview" {
				resp.Header.Add("Content-Security-Policy", previewPolicy(r.Context()))
			} else {
				resp.Header.Add("Content-Security-Policy", sandboxCSP)
			}
			if modify != nil && resp.StatusCode != http.StatusSwitchingProtocols {
				return modify(resp)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			h.log.Warn("relay", "kind", kind, "sandbox", rel.Sandbox, "port", rel.Port, "err", err, "request_id", api.RequestID(r.Context()))
			var nj *notJSONError
			switch {
			case errors.As(err, &nj) && nj.status == http.StatusNotFound:
				api.WriteError(w, r, fault.New(fault.NotFound, "DevTools does not serve that path"))
			case errors.As(err, &nj):
				api.WriteError(w, r, fault.New(fault.Unavailable, "DevTools answered something other than JSON; refused"))
			default:
				api.WriteError(w, r, fault.New(fault.Unavailable, "the server in the sandbox did not answer"))
			}
		},
	}
	rp.ServeHTTP(w, r)
	if ws {
		h.auditEnd(r, c, kind, rel, started)
	}
}

// auditEnd records the end of a WebSocket relay.
func (h *Relays) auditEnd(r *http.Request, c auth.Caller, kind string, rel *browser.Relay, started time.Time) {
	ctx := context.WithoutCancel(r.Context())
	if _, err := h.audit.Append(ctx, audit.Entry{
		Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr, Action: kind + ".disconnect",
		Target: fmt.Sprintf("port %d", rel.Port), Sandbox: sandboxOf(r, rel), Verdict: audit.Allow,
		Detail: map[string]any{"seconds": int64(time.Since(started).Seconds())},
	}); err != nil {
		h.log.Error("audit relay end", "kind", kind, "err", err)
	}
}

func sandboxOf(r *http.Request, rel *browser.Relay) string {
	if id := chi.URLParam(r, "id"); id != "" {
		return id
	}
	return rel.Sandbox
}

// vnc relays noVNC's WebSocket (binary frames carrying RFB) to the
// sandbox's x11vnc, which speaks plain RFB over TCP.
func (h *Relays) vnc(w http.ResponseWriter, r *http.Request) {
	if !isWebSocket(r) {
		api.WriteError(w, r, fault.New(fault.Invalid, "this route needs a WebSocket upgrade"))
		return
	}
	id := chi.URLParam(r, "id")
	c, rel, err := open(h, r, browser.ToolVNC, browser.ConnectArgs{On: dispatch.On{Sandbox: id}})
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	defer func() { _ = rel.Close() }()
	forget := h.relays.Track(c.KeyID, rel)
	defer forget()
	started := time.Now()
	wsc, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"binary"}, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	client := websocket.NetConn(ctx, wsc, websocket.MessageBinary)
	idle := newIdleTimer(vncIdle, func() { _ = client.Close(); _ = rel.Close() })
	defer idle.stop()
	done := make(chan struct{}, 2)
	pump := func(dst io.Writer, src io.Reader) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				idle.touch()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pump(rel, client)
	go pump(client, rel)
	<-done
	_ = client.Close()
	_ = rel.Close()
	<-done
	h.auditEnd(r, c, "vnc", rel, started)
}

// idleTimer calls fire after d without touch.
type idleTimer struct {
	t *time.Timer
	d time.Duration
}

func newIdleTimer(d time.Duration, fire func()) *idleTimer {
	return &idleTimer{t: time.AfterFunc(d, fire), d: d}
}

func (i *idleTimer) touch() { i.t.Reset(i.d) }
func (i *idleTimer) stop()  { i.t.Stop() }

// relayReplays is how many times a relayed request without a body is
// sent again after its connection failed before any answer.
const relayReplays = 2

// replayRelay sends a relayed GET or HEAD without a body (the DevTools
// /json endpoints, a WebSocket upgrade) again over a fresh connection
// when the first failed before any answer: DevTools resets connections
// now and then while it starts or thaws. Nothing was answered, so
// nothing is repeated for the client; other requests fail at once.
type replayRelay struct {
	tr   http.RoundTripper
	log  *slog.Logger
	kind string
}

func (rr replayRelay) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := rr.tr.RoundTrip(req)
		replayable := (req.Method == http.MethodGet || req.Method == http.MethodHead) && (req.Body == nil || req.Body == http.NoBody)
		if err == nil || attempt == relayReplays || !replayable || rr.kind != "cdp" || req.Context().Err() != nil {
			return resp, err
		}
		rr.log.Info("relay: sent again over a fresh connection", "kind", rr.kind, "attempt", attempt+1, "err", err)
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
}
