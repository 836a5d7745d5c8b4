// Package api is sandhold's HTTP surface: the chi router and huma API
// (OpenAPI 3.1 generated from the handlers), the AIO response envelope, the
// one table from error kind to status, and the middleware chain every
// request passes:
//
//	request id → recover → access log + metrics → Host/Origin check →
//	body-size limit → authentication and the route's role check →
//	request shape (no method override; JSON content type, else 415)
//
// It stops DNS rebinding and cross-site requests against a localhost server
// (Host and Origin checks), unauthenticated access (every route but the
// public ones needs a key; no credential means 401 before any disk I/O),
// oversize bodies (413 before reading) and information leaks in errors
// (clients get a kind, a message and a request id; the detail is logged).
//
// Other packages add routes to the same router and API after New: use
// Router() for plain handlers (SSE, WebSocket, streams; write errors with
// WriteError) and API() with huma.Register for JSON operations (return
// fault errors; set MaxBodyBytes to MaxBody() for bodies). Handlers find
// the caller with auth.CallerFrom(ctx) or MustCaller.
package api

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// Deps are what the server needs; the daemon builds them.
type Deps struct {
	Config   config.Config
	Auth     *auth.Service
	Audit    *audit.Log
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Version  string
}

// Server is the HTTP API.
type Server struct {
	// docs, when set, serves /docs (ServeDocs).
	docs         http.HandlerFunc
	cfg          config.Config
	auth         *auth.Service
	audit        *audit.Log
	log          *slog.Logger
	reg          *prometheus.Registry
	metrics      *httpMetrics
	version      string
	loopbackBind bool

	router chi.Router
	// docOnce completes the OpenAPI document before it is first served.
	docOnce sync.Once
	api     huma.API

	// largeBodyPrefixes are set before serving and read-only afterwards.
	largeBodyPrefixes []string
	// bodies bounds the request bodies held at once (bodybudget.go).
	bodies *bodyBudget
	// selfAuthPrefixes are the paths of self-authenticated protocols
	// (selfauth.go); set before serving, read-only afterwards.
	selfAuthPrefixes []string
	selfAuthPaths    []string
	// rawBodyPatterns are route patterns whose bodies are relayed as sent,
	// any media type (RelayRoute, selfauth.go); set before serving,
	// read-only afterwards.
	rawBodyPatterns []string
	// session is the web console's cookie sign-in (console_hook.go); nil
	// without the console. Set before serving.
	session SessionAuth

	// The sandbox-content origin (content.go), built by New; the relays
	// are added by internal/api/relay (UseHostRelays, RelayRoute).
	// contentPages, contentAddr and relays are set before serving.
	contentRoot  http.Handler
	contentPaths chi.Router
	contentPages ContentPages
	contentAddr  string
	sessions     *contentSessions
	relays       HostRelays
	// relayPatterns are the relay routes' patterns (the console's cookie
	// never opens them); set by RelayRoute, read-only afterwards.
	relayPatterns []string

	// disp is the dispatcher the foundation routes call (keys, tickets,
	// audit); set by UseDispatcher before serving.
	disp *dispatch.Dispatcher

	// table is the route table of the AIO rows (table.go); set by
	// UseTable before serving.
	table Table

	// sandboxes resolves the sandbox of an AIO route's URL before its
	// tool runs (Sandboxes); set by SandboxRoutes before serving, nil
	// without sandboxes.
	sandboxes *sandbox.Manager
}

// humaDefaultMaxBody is what huma gives an operation with a body that left
// MaxBodyBytes at zero.
const humaDefaultMaxBody = 1 << 20

//go:embed docs/index.html
var docsPage []byte

// New builds the router, the middleware chain and the foundation routes.
func New(d Deps) (*Server, error) {
	if d.Auth == nil || d.Audit == nil || d.Registry == nil {
		return nil, fmt.Errorf("api: missing dependency")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	m, err := newHTTPMetrics(d.Registry)
	if err != nil {
		return nil, fmt.Errorf("api: metrics: %w", err)
	}
	s := &Server{
		cfg: d.Config, auth: d.Auth, audit: d.Audit, log: d.Logger, reg: d.Registry,
		metrics: m, version: d.Version, loopbackBind: config.IsLoopbackListen(d.Config.Listen),
		bodies: newBodyBudget(d.Config.BodyBudget.Bytes(), d.Config.MaxBody.Bytes()),
	}
	r := chi.NewRouter()
	r.Use(s.toolLevelMiddleware, s.openAPIDocMiddleware, s.requestIDMiddleware, s.recoverMiddleware, s.accessLogAndMetrics,
		s.hostOriginMiddleware, s.bodyLimitMiddleware, s.authMiddleware, s.bodyBudgetMiddleware, s.requestShapeMiddleware)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, errNotFound)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, errMethod)
	})
	s.router = r

	hc := huma.DefaultConfig("sandhold API", d.Version)
	hc.Info.Description = "Secure multi-tenant sandbox server for AI agents. Every response is an envelope {success, message, data, hint}."
	hc.CreateHooks = nil // no $schema links in bodies: responses keep the AIO shape exactly
	hc.DocsPath = ""     // /docs is our own page (no CDN here)
	hc.SchemasPath = ""
	hc.Formats = map[string]huma.Format{"application/json": jsonFormat, "json": jsonFormat}
	hc.Components.Schemas = huma.NewMapRegistry("#/components/schemas/", schemaName)
	// Operations that leave MaxBodyBytes unset get huma's 1 MiB; JSON
	// routes here take up to SANDBOX_MAX_BODY (a 10MB file in a JSON file
	// call must fit), so raise the default to it. An operation that wants
	// less sets any other value; -1 (unlimited) stays.
	maxBody := d.Config.MaxBody.Bytes()
	hc.OnAddOperation = append(hc.OnAddOperation, func(_ *huma.OpenAPI, op *huma.Operation) {
		if op.MaxBodyBytes == humaDefaultMaxBody {
			op.MaxBodyBytes = maxBody
		}
	})
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "Authorization: Bearer <key>"},
		"apiKey": {Type: "apiKey", In: "header", Name: "X-API-Key"},
	}
	s.api = humachi.New(r, hc)
	s.newContent()

	s.routes()
	return s, nil
}

// ServeDocs replaces the built-in /docs page (the console serves its API
// reference viewer from its bundle). Call before serving.
func (s *Server) ServeDocs(h http.HandlerFunc) { s.docs = h }

// Router is the chi router, for plain handlers.
func (s *Server) Router() chi.Router { return s.router }

// ContentRouter is the content listener's routes by path (the relays):
// the chokepoint conformance test walks it beside Router.
func (s *Server) ContentRouter() chi.Router { return s.contentPaths }

// API is the huma API, for huma.Register.
func (s *Server) API() huma.API { return s.api }

// Handler is the root handler to serve. It reads how long a caller is
// willing to wait for an operator's approval (approvals.go).
func (s *Server) Handler() http.Handler { return withApprovalWait(s.originHandler(s.router)) }

// MaxBody is the JSON body cap (SANDBOX_MAX_BODY) for huma operations.
func (s *Server) MaxBody() int64 { return s.cfg.MaxBody.Bytes() }

// AllowLargeBodies exempts paths under prefix from the SANDBOX_MAX_BODY
// cap; their handlers must cap the body themselves (uploads). Call before
// serving.
func (s *Server) AllowLargeBodies(prefix string) {
	s.largeBodyPrefixes = append(s.largeBodyPrefixes, prefix)
}

// Security marks an operation as needing a key (for the OpenAPI document).
var Security = []map[string][]string{{"bearer": {}}, {"apiKey": {}}}

func (s *Server) routes() {
	huma.Register(s.api, huma.Operation{
		OperationID: "healthz", Method: http.MethodGet, Path: "/healthz", Tags: []string{"system"},
		Summary: "Liveness (no authentication)",
	}, s.healthz)

	s.router.Get("/docs", func(w http.ResponseWriter, r *http.Request) {
		if s.docs != nil {
			s.docs(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(docsPage)
	})

	metrics := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	s.router.Get("/metrics", func(w http.ResponseWriter, r *http.Request) {
		c, err := MustCaller(r.Context())
		if err == nil {
			err = s.auth.Require(r.Context(), c, "read metrics", auth.RoleAdmin, auth.RoleViewer)
		}
		if err != nil {
			WriteError(w, r, err)
			return
		}
		metrics.ServeHTTP(w, r)
	})

	s.keyRoutes()
	s.ticketRoutes()
	s.auditRoutes()
}

// HealthOutput is GET /healthz.
type HealthOutput struct {
	Body Envelope[HealthData]
}

// HealthData reports liveness.
type HealthData struct {
	Status  string `json:"status" example:"ok"`
	Version string `json:"version"`
}

func (s *Server) healthz(_ context.Context, _ *struct{}) (*HealthOutput, error) {
	return &HealthOutput{Body: OK(HealthData{Status: "ok", Version: s.version})}, nil
}
