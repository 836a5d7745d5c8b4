package api

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Two origins.
//
// The web console signs people in with a cookie on this server's origin,
// and its pages can read the CSRF token that every state-changing call
// needs. What a sandbox serves — the preview of its own web servers, its
// browser's DevTools, its desktop — is written by whoever controls the
// sandbox (an agent) and looked at by someone else (the operator). Served
// on the console's origin, one such page runs as the console: it reads
// /console/session's token and creates an admin key with the operator's
// cookie (issue 29, row 1).
//
// So everything a sandbox controls is served on a sandbox-content origin
// that never accepts the console's cookie:
//
//   - SANDBOX_CONTENT_DOMAIN: the host {port}-{id}.<domain> (wildcard DNS to
//     this server, on any of its listeners) is an origin per sandbox and
//     port — the preview of that port, 9222: the DevTools relay, 5900: the
//     desktop (the noVNC page and its relay). A preview there runs in its
//     own origin (allow-same-origin: the host holds nothing but that
//     preview) and a preview ticket opened there starts a content session
//     (content_session.go), so a browser can load the page's resources.
//   - SANDBOX_CONTENT_LISTEN: a listener of its own serving the path forms
//     (/sandboxes/{id}/proxy/{port}/…, /cdp/…, /vnc/…), for hosts without
//     wildcard DNS. Every sandbox shares that origin, so pages there keep
//     an opaque origin (CSP sandbox without allow-same-origin), as on the
//     console's origin.
//
// On the console's origin the path forms stay for API clients: a key
// header or a ticket of the route's scope authenticates them, never the
// console's cookie (authMiddleware); a browser navigating to one is sent
// to the content origin with its ticket unspent, when one is configured;
// and every relayed answer carries a CSP sandbox policy (an opaque origin:
// no cookie of this origin is sent from it) and nosniff.

// contentTarget is what a content host names: a sandbox and a port.
type contentTarget struct {
	id   string
	port int
}

type contentTargetKey struct{}

// kind is the relay a content host serves.
func (t contentTarget) kind() string {
	switch t.port {
	case sandbox.DevToolsPort:
		return "cdp"
	case sandbox.VNCPort:
		return "vnc"
	}
	return "preview"
}

// maxContentID is the longest sandbox id a host label can carry (a DNS
// label is at most 63 bytes: "65535-" and the id).
const maxContentID = 57

// contentHostTarget parses a Host of the form {port}-{id}.<domain>.
func (s *Server) contentHostTarget(hostport string) (contentTarget, bool) {
	d := s.cfg.ContentDomain
	if d == "" {
		return contentTarget{}, false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+d)
	if !ok || strings.Contains(label, ".") {
		return contentTarget{}, false
	}
	p, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(p)
	if !ok || err != nil || port < 1 || port > 65535 || p != strconv.Itoa(port) {
		return contentTarget{}, false
	}
	if !contentID(id) {
		return contentTarget{}, false
	}
	return contentTarget{id: id, port: port}, true
}

// contentID says whether id can stand in a content host's label: 1 to
// maxContentID lowercase letters and digits. Anything else (".", "@", "#",
// "/", decoded from a path) could move the host somewhere else.
func contentID(id string) bool {
	if id == "" || len(id) > maxContentID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if b := id[i]; (b < 'a' || b > 'z') && (b < '0' || b > '9') {
			return false
		}
	}
	return true
}

// contentFrom is the content host a request came for, if any.
func contentFrom(ctx context.Context) (contentTarget, bool) {
	t, ok := ctx.Value(contentTargetKey{}).(contentTarget)
	return t, ok
}

// ContentPages are the console's pages served on the content origin: the
// noVNC page (it shows a sandbox's desktop, so it lives beside the relay it
// connects to) and the bundle's assets it loads. They carry no data and
// need no credential; internal/console provides them.
type ContentPages interface {
	// ServeVNCPage serves the noVNC page.
	ServeVNCPage(w http.ResponseWriter, r *http.Request)
	// ServeAsset serves one file of the bundle's assets (name below
	// /console/assets/).
	ServeAsset(w http.ResponseWriter, r *http.Request, name string)
}

// UseContentPages installs the console's pages for the content origin.
// Call before serving.
func (s *Server) UseContentPages(p ContentPages) { s.contentPages = p }

// contentAssetPrefix is where the console's assets are served, on both
// origins.
const contentAssetPrefix = "/console/assets/"

// newContent builds the content origin's handler: the same request id,
// recovery, access log and body cap as the console's origin, then its own
// Host/Origin rule and authentication (keys, tickets, content sessions;
// never the console's cookie). The relay routes are added by internal/api/relay.
func (s *Server) newContent() {
	paths := chi.NewRouter()
	paths.NotFound(func(w http.ResponseWriter, r *http.Request) { WriteError(w, r, errNotFound) })
	paths.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) { WriteError(w, r, errMethod) })
	s.contentPaths = paths
	s.sessions = newContentSessions(nil)
	inner := http.HandlerFunc(s.serveContent)
	chain := s.requestIDMiddleware(s.recoverMiddleware(s.accessLogAndMetrics(s.bodyLimitMiddleware(inner))))
	s.contentRoot = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t, ok := s.contentHostTarget(r.Host); ok {
			// The route the host stands for, for the access log's route
			// label and the handlers' parameters.
			rctx := chi.NewRouteContext()
			rctx.URLParams.Add("id", t.id)
			rctx.URLParams.Add("port", strconv.Itoa(t.port))
			rctx.URLParams.Add("*", strings.TrimPrefix(r.URL.Path, "/"))
			rctx.RoutePatterns = []string{"{port}-{id}." + s.cfg.ContentDomain + " " + t.kind()}
			ctx := context.WithValue(r.Context(), chi.RouteCtxKey, rctx)
			r = r.WithContext(context.WithValue(ctx, contentTargetKey{}, t))
		}
		chain.ServeHTTP(w, r)
	})
}

// ContentHandler is the handler of the content listener
// (SANDBOX_CONTENT_LISTEN).
func (s *Server) ContentHandler() http.Handler { return withApprovalWait(s.contentRoot) }

// SetContentAddr tells the server where its content listener listens (the
// bound address: a port 0 is known only then), for the links and
// redirects it hands browsers. Call before serving.
func (s *Server) SetContentAddr(addr string) { s.contentAddr = addr }

// serveContent serves one request on the content origin.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request) {
	t, hostBased := contentFrom(r.Context())
	if !hostBased && !s.hostAllowedOn(r.Host, config.IsLoopbackListen(s.cfg.ContentListen)) {
		WriteError(w, r, fault.New(fault.Misdirected, "this server does not answer for that Host"))
		return
	}
	// A browser's request from another origin (another sandbox's preview,
	// any web page) is refused; so is an opaque origin's ("null").
	if o := r.Header.Get("Origin"); o != "" && !s.sameOrigin(o, r.Host) {
		WriteError(w, r, fault.New(fault.Forbidden, "cross-origin request refused"))
		return
	}
	if s.servePublicContent(w, r, t, hostBased) {
		return
	}
	if !hostBased {
		s.authenticate(w, r, s.contentPaths, s.contentPattern(r))
		return
	}
	h, pattern := s.contentHostRoute(r, t)
	if h == nil {
		WriteError(w, r, errNotFound)
		return
	}
	if t.kind() == "preview" && s.serveContentSession(w, r, h, t, pattern) {
		return
	}
	s.authenticate(w, r, h, pattern)
}

// servePublicContent serves the pages that need no credential: the noVNC
// page and the console's assets (GET and HEAD only).
func (s *Server) servePublicContent(w http.ResponseWriter, r *http.Request, t contentTarget, hostBased bool) bool {
	if s.contentPages == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	p := r.URL.Path
	if hostBased && t.kind() != "vnc" {
		return false // a preview's own paths belong to the preview
	}
	if name, ok := strings.CutPrefix(p, contentAssetPrefix); ok {
		s.contentPages.ServeAsset(w, r, name)
		return true
	}
	vncPage := p == "/" || p == "/index.html"
	if !hostBased {
		rest, ok := strings.CutPrefix(p, "/sandboxes/")
		id, tail, _ := strings.Cut(rest, "/")
		vncPage = ok && id != "" && tail == "vnc/index.html"
	}
	if vncPage {
		s.contentPages.ServeVNCPage(w, r)
		return true
	}
	return false
}

// contentPattern is the path router's pattern for r on the content
// listener ("" when none matches).
func (s *Server) contentPattern(r *http.Request) string { return findPattern(s.contentPaths, r) }

// contentHostRoute is the relay a content host serves for r, with the
// path-form pattern it stands for (its roles and ticket scope).
func (s *Server) contentHostRoute(r *http.Request, t contentTarget) (http.Handler, string) {
	if s.relays == nil {
		return nil, ""
	}
	switch t.kind() {
	case "cdp":
		return http.HandlerFunc(s.relays.CDP), "/sandboxes/{id}/cdp/*"
	case "vnc":
		if r.URL.Path != "/websockify" {
			return nil, ""
		}
		return http.HandlerFunc(s.relays.VNC), "/sandboxes/{id}/vnc/websockify"
	}
	// The preview keeps the whole path (the host is the prefix).
	return http.HandlerFunc(s.relays.Preview), "/sandboxes/{id}/absproxy/{port}/*"
}

// ContentOrigin tells the console where sandbox content lives, as seen by
// the browser that sent r: Host is a template with {port} and {id}
// ("http://{port}-{id}.sandbox.example:8080"), Listener the content
// listener's base URL. Both empty: no content origin is configured.
type ContentOrigin struct {
	Host     string `json:"host,omitempty"`
	Listener string `json:"listener,omitempty"`
}

// ContentOrigin is where sandbox content lives for r's browser.
func (s *Server) ContentOrigin(r *http.Request) ContentOrigin {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	var o ContentOrigin
	if d := s.cfg.ContentDomain; d != "" {
		host := "{port}-{id}." + d
		if _, p, err := net.SplitHostPort(r.Host); err == nil {
			host += ":" + p
		}
		o.Host = scheme + "://" + host
	}
	if s.contentAddr != "" {
		_, port, err := net.SplitHostPort(s.contentAddr)
		host := r.Host
		if h, _, herr := net.SplitHostPort(r.Host); herr == nil {
			host = h
		}
		if err == nil {
			o.Listener = scheme + "://" + net.JoinHostPort(strings.Trim(host, "[]"), port)
		}
	}
	return o
}

// contentURL is where a path form of the console's origin lives on the
// content origin ("" without one): hostPath on the host {port}-{id}, else
// the same path on the listener.
func (s *Server) contentURL(r *http.Request, id string, port int, hostPath string) string {
	o := s.ContentOrigin(r)
	if o.Host != "" {
		base := strings.Replace(strings.Replace(o.Host, "{port}", strconv.Itoa(port), 1), "{id}", id, 1)
		return base + hostPath
	}
	if o.Listener != "" {
		return o.Listener + r.URL.EscapedPath()
	}
	return ""
}

// navigationToContent is where a browser navigating to a path form on the
// console's origin is sent ("" to serve it here): the same content on the
// content origin, with the query (and so its ticket, unspent) kept. Only
// navigations are moved (Sec-Fetch-Mode: navigate, sent by browsers and
// not settable by page script); API clients keep the path forms.
func (s *Server) navigationToContent(r *http.Request) string {
	if (s.cfg.ContentDomain == "" && s.contentAddr == "") || r.Header.Get("Sec-Fetch-Mode") != "navigate" ||
		(r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return ""
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/sandboxes/")
	if !ok {
		return ""
	}
	id, tail, _ := strings.Cut(rest, "/")
	if !contentID(id) {
		return ""
	}
	kind, after, _ := strings.Cut(tail, "/")
	var (
		port     int
		hostPath string
	)
	switch kind {
	case "proxy", "absproxy":
		p, below, _ := strings.Cut(after, "/")
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return ""
		}
		port, hostPath = n, "/"+below
		if kind == "absproxy" {
			hostPath = r.URL.Path
		}
	case "cdp":
		port, hostPath = sandbox.DevToolsPort, "/"+after
	case "vnc":
		if after != "index.html" || !r.URL.Query().Has("ticket") {
			// Without a ticket the console's own page mints one with the
			// session and moves itself (web/src/vnc.ts).
			return ""
		}
		port, hostPath = sandbox.VNCPort, "/index.html"
	default:
		return ""
	}
	u := s.contentURL(r, id, port, hostPath)
	if u == "" {
		return ""
	}
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	if _, err := url.Parse(u); err != nil {
		return ""
	}
	return u
}

// originHandler puts the content origin in front of the console's: a
// request for a content host goes to it, and a browser navigating to a
// path form is sent there.
func (s *Server) originHandler(main http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.contentHostTarget(r.Host); ok {
			s.contentRoot.ServeHTTP(w, r)
			return
		}
		if u := s.navigationToContent(r); u != "" {
			h := w.Header()
			h.Set("Cache-Control", "no-store")
			h.Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, u, http.StatusTemporaryRedirect) //nolint:gosec // G710: the target is the configured content domain or listener with a checked id (contentID), a parsed port and this request's path
			return
		}
		main.ServeHTTP(w, r)
	})
}
