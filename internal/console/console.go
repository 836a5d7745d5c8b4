// Package console serves sandhold's web console at / : the pages built from
// web/ (TypeScript bundled by esbuild, embedded at build time; nothing is
// loaded from a CDN), the noVNC page of each sandbox at
// /sandboxes/{id}/vnc/index.html, and the console's sign-in, which
// exchanges an API key for a server-side session held in an HttpOnly
// cookie (session.go names the attacks each cookie rule stops).
//
// The console has no powers of its own: every action it offers is a call
// to the same HTTP API, authenticated by the session cookie (or, for
// WebSockets, by a one-time ticket), so it passes the same route role
// check, dispatcher, rate limits, policy and audit as a call with the key.
//
// A binary built without the assets (plain `go build`, no npm) serves a
// page saying how to build them (`make console`, or `make build`).
package console

import (
	"github.com/danielgtaylor/huma/v2"

	"context"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

// dist is web/'s build output (web/build.mjs writes it; .gitignore keeps
// it out of the tree, so a fresh checkout embeds only that file).
//
//go:embed all:dist
var dist embed.FS

//go:embed unbuilt.html
var unbuiltPage []byte

// Paths the console serves.
const (
	// AssetPrefix is where the bundle's files are served from.
	AssetPrefix = "/console/assets/"
	// SessionPath is the sign-in (POST), session info (GET) and sign-out
	// (DELETE) endpoint.
	SessionPath = "/console/session"
	// VNCPagePattern is the noVNC page of a sandbox.
	VNCPagePattern = "/sandboxes/{id}/vnc/index.html"
)

// Deps are what the console needs.
type Deps struct {
	Auth   *auth.Service
	Keys   KeyReader
	Audit  audit.Appender
	Logger *slog.Logger
	// Assets overrides the embedded bundle (tests); nil uses the embedded one.
	Assets fs.FS
}

// Console is the mounted console.
type Console struct {
	auth     *auth.Service
	audit    audit.Appender
	log      *slog.Logger
	assets   fs.FS // the bundle root (index.html, vnc.html, assets/…) or nil when not built
	sessions *Sessions
	// srv says where sandbox content lives (for the session's info).
	srv *api.Server
}

// Mount adds the console's routes to srv, installs its session
// authentication in srv's auth middleware and ends a key's sessions when
// the key is revoked.
func Mount(srv *api.Server, d Deps) (*Console, error) {
	if d.Auth == nil || d.Keys == nil {
		return nil, errors.New("console: missing dependency")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	c := &Console{auth: d.Auth, audit: d.Audit, log: d.Logger, sessions: NewSessions(d.Keys, nil)}
	c.assets = d.Assets
	if c.assets == nil {
		sub, err := fs.Sub(dist, "dist")
		if err != nil {
			return nil, err
		}
		c.assets = sub
	}
	if _, err := fs.Stat(c.assets, "index.html"); err != nil {
		c.assets = nil // not built: serve the page that says how
	}
	r := srv.Router()
	r.Get("/", c.page("index.html"))
	r.Get(AssetPrefix+"*", c.asset)
	r.Get(VNCPagePattern, c.page("vnc.html"))
	if c.assets != nil {
		if _, err := fs.Stat(c.assets, "docs.html"); err == nil {
			srv.ServeDocs(c.docsPage)
		}
	}
	r.Post(SessionPath, c.signIn)
	r.Get(SessionPath, c.sessionInfo)
	r.Delete(SessionPath, c.signOut)
	srv.UseSessionAuth(c)
	srv.UseContentPages(c)
	c.srv = srv
	d.Auth.OnRevoke(c.sessions.EndKey)
	documentSession(srv.API().OpenAPI())
	return c, nil
}

// documentSession lists the console's sign-in routes in /openapi.json (the
// pages and assets are not API and are left out, with their reasons, in
// the document test).
func documentSession(oa *huma.OpenAPI) {
	for _, op := range []struct{ method, id, summary, desc string }{
		{http.MethodPost, "console-signin", "Console sign-in: exchange a key for a session cookie",
			`Body {"key": "shk_…"}, or {"ticket": "sht_…"} with a one-time ticket of scope console (minted with the key; a console session mints none). Sets an HttpOnly, SameSite=Strict session cookie (Secure and __Host- over TLS) and answers the CSRF token every state-changing cookie request must send as X-CSRF-Token. The key is checked like a header key (lockout, audit) and never stored in the browser.`},
		{http.MethodGet, "console-session", "Console session: who is signed in, and the CSRF token", "Needs the session cookie."},
		{http.MethodDelete, "console-signout", "Console sign-out: end the session", "Needs the session cookie and X-CSRF-Token."},
	} {
		oa.AddOperation(&huma.Operation{OperationID: op.id, Method: op.method, Path: SessionPath, Tags: []string{"console"},
			Summary: op.summary, Description: op.desc,
			Responses: map[string]*huma.Response{"200": {Description: "the envelope"}, "401": {Description: "no or a bad key / session"}, "403": {Description: "missing CSRF token or a cross-site request"}}})
	}
}

// Sessions is the session table (tests).
func (c *Console) Sessions() *Sessions { return c.sessions }

// Built reports whether the console's assets are in the binary.
func (c *Console) Built() bool { return c.assets != nil }

// Public reports the console's own paths: they need no credential (pages
// and assets are the same for everyone; the session endpoint checks the
// cookie itself).
func (c *Console) Public(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case p == "/" || p == SessionPath:
		return true
	case strings.HasPrefix(p, AssetPrefix):
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	case strings.HasPrefix(p, "/sandboxes/") && strings.HasSuffix(p, "/vnc/index.html"):
		// The page only; its ticket (in the query) is for the WebSocket
		// relay and must not be spent on loading the page.
		return strings.Count(p, "/") == 4 && (r.Method == http.MethodGet || r.Method == http.MethodHead)
	}
	return false
}

// Carries implements api.SessionAuth.
func (c *Console) Carries(r *http.Request) bool { return c.sessions.Carries(r) }

// Authenticate implements api.SessionAuth.
func (c *Console) Authenticate(r *http.Request) (auth.Caller, error) {
	return c.sessions.Authenticate(r)
}

var _ api.SessionAuth = (*Console)(nil)

// ServeVNCPage implements api.ContentPages: the noVNC page on the content
// origin.
func (c *Console) ServeVNCPage(w http.ResponseWriter, r *http.Request) { c.page("vnc.html")(w, r) }

// ServeAsset implements api.ContentPages: a file of the bundle's assets.
func (c *Console) ServeAsset(w http.ResponseWriter, r *http.Request, name string) {
	c.serveAsset(w, r, name)
}

var _ api.ContentPages = (*Console)(nil)

// pageCSP: scripts and styles from this origin only (xterm.js and noVNC
// set inline styles, hence 'unsafe-inline' for styles alone), API calls
// and WebSockets to this origin, no framing, no plugins, no base
// rewriting, forms only here.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// docsCSP is /docs's policy: Redoc's bundle and the page's module from
// this origin, the document fetched from here; Redoc sets inline styles
// (styled-components) and runs its search index in a worker it makes from
// a blob. No framing, no forms, nothing from elsewhere (fonts included).
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
	"font-src 'self' data:; connect-src 'self'; worker-src blob:; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// docsPage serves the API reference viewer at /docs.
func (c *Console) docsPage(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(c.assets, "docs.html")
	if err != nil {
		api.WriteError(w, r, fault.New(fault.NotFound, "not found"))
		return
	}
	securityHeaders(w.Header())
	w.Header().Set("Content-Security-Policy", docsCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b)
}

// page serves one HTML file of the bundle (or the unbuilt page).
func (c *Console) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if c.assets == nil {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(unbuiltPage)
			return
		}
		b, err := fs.ReadFile(c.assets, name)
		if err != nil {
			api.WriteError(w, r, fault.New(fault.NotFound, "not found"))
			return
		}
		_, _ = w.Write(b)
	}
}

// asset serves a file under assets/ of the bundle: regular files only, no
// listing, no dot files.
func (c *Console) asset(w http.ResponseWriter, r *http.Request) {
	c.serveAsset(w, r, chi.URLParam(r, "*"))
}

// serveAsset serves rel below assets/ of the bundle.
func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request, rel string) {
	clean := path.Clean("/" + rel)[1:]
	if c.assets == nil || rel == "" || clean != rel || strings.HasPrefix(path.Base(clean), ".") || !fs.ValidPath(clean) {
		api.WriteError(w, r, fault.New(fault.NotFound, "not found"))
		return
	}
	name := "assets/" + clean
	st, err := fs.Stat(c.assets, name)
	if err != nil || !st.Mode().IsRegular() {
		api.WriteError(w, r, fault.New(fault.NotFound, "not found"))
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", ct)
	http.ServeFileFS(w, r, c.assets, name) // #nosec G703 -- name passed path.Clean and fs.ValidPath and is opened in the embedded read-only bundle, an fs.FS that cannot leave its root
}

// maxSignInBody bounds the sign-in body: a key is 47 characters.
const maxSignInBody = 4096

// signIn exchanges a key (or a ticket of scope console) for a session:
// POST {"key": "shk_…"} or {"ticket": "sht_…"}. The credential is checked
// by auth.Service.Authenticate, so failures count towards the address's
// lockout and are audited like any wrong key.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		api.WriteError(w, r, errCrossSite)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		api.WriteError(w, r, fault.New("unsupported_media_type", "sign-in takes application/json"))
		return
	}
	var body struct {
		Key    string `json:"key"`
		Ticket string `json:"ticket"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSignInBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || (body.Key == "") == (body.Ticket == "") {
		api.WriteError(w, r, fault.New(fault.Invalid, `send {"key": "<API key>"} or {"ticket": "<console ticket>"}`))
		return
	}
	addr := auth.ClientIP(r.RemoteAddr)
	// A ticket of scope console (minted with the key, e.g. by a CLI that
	// opens the console) signs in without the key entering the browser.
	cred := auth.Credential{Key: body.Key}
	if body.Ticket != "" {
		cred = auth.Credential{Ticket: body.Ticket, Scopes: []auth.TicketScope{auth.ScopeConsole}}
	}
	caller, err := c.auth.Authenticate(r.Context(), addr, cred)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	if old := sessionID(r); old != "" {
		c.sessions.end(old) // a new sign-in replaces the browser's previous session
	}
	id, info, err := c.sessions.create(caller)
	if err != nil {
		api.WriteError(w, r, fault.Wrap(fault.Internal, err, "could not start a session"))
		return
	}
	setCookie(w, r, id, int(SessionMax.Seconds()))
	c.record(r.Context(), caller, "console.signin")
	api.WriteData(w, http.StatusOK, info)
}

// sessionInfo answers who the session is, with its CSRF token (readable
// only by same-origin script: no CORS for credentials here).
func (c *Console) sessionInfo(w http.ResponseWriter, r *http.Request) {
	caller, id, err := c.sessions.authenticate(r)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	ss, ok := c.sessions.lookup(id)
	if !ok {
		api.WriteError(w, r, errNoSession)
		return
	}
	api.WriteData(w, http.StatusOK, Info{KeyID: caller.KeyID, KeyName: caller.KeyName, Role: caller.Role,
		CSRFToken: ss.csrf, ExpiresAt: ss.created.Add(SessionMax), Content: c.srv.ContentOrigin(r)})
}

// signOut ends the session (CSRF token required, as for any change).
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	caller, id, err := c.sessions.authenticate(r)
	if err != nil {
		if errors.Is(err, errNoSession) {
			setCookie(w, r, "", -1)
		}
		api.WriteError(w, r, err)
		return
	}
	c.sessions.end(id)
	setCookie(w, r, "", -1)
	c.record(r.Context(), caller, "console.signout")
	api.WriteData(w, http.StatusOK, map[string]bool{"signed_out": true})
}

func (c *Console) record(ctx context.Context, caller auth.Caller, action string) {
	if c.audit == nil {
		return
	}
	if _, err := c.audit.Append(context.WithoutCancel(ctx), audit.Entry{Actor: caller.KeyID, Role: string(caller.Role),
		ClientAddr: caller.Addr, Action: action, Verdict: audit.Allow}); err != nil {
		c.log.Error("audit append failed", "action", action, "err", err)
	}
}

// EmbeddedBuilt reports whether the binary carries the built console.
func EmbeddedBuilt() bool {
	_, err := fs.Stat(dist, "dist/index.html")
	return err == nil
}
