package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/redact"
)

type requestIDKey struct{}

// RequestID returns the request id the server assigned ("" outside a request).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func newRequestID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "req-unknown"
	}
	return "req_" + hex.EncodeToString(b)
}

// requestIDMiddleware assigns a fresh id (client-supplied ids are not
// trusted: they would let a client forge log correlation) and a
// request-scoped logger.
func (s *Server) requestIDMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newRequestID()
		h := w.Header()
		h.Set("X-Request-Id", id)
		// API answers carry keys, tickets and audit data: never cache them,
		// never sniff them, never leak the URL onward.
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		ctx = context.WithValue(ctx, loggerKey{}, &requestLogger{base: s.log, id: id})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// recoverMiddleware turns a panic into a 500 envelope; the stack goes to the
// log only.
func (s *Server) recoverMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				LoggerFrom(r.Context()).Error("panic in handler", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				WriteError(w, r, fault.Wrap(fault.Internal, fmt.Errorf("panic: %v", v), "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers the status and size; it passes Flush and
// Unwrap through so SSE and WebSocket handlers keep working.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// beforeHeader, when set, runs once just before the status is sent.
	beforeHeader func(status int)
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if w.beforeHeader != nil {
			w.beforeHeader(code)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		if w.beforeHeader != nil {
			w.beforeHeader(http.StatusOK)
		}
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// ReadFrom passes a copy on to the next writer down that can read from
// the reader itself (the connection: sendfile, for downloads) and counts
// what it sent, so the access log's bytes are right for streamed files too.
func (w *statusRecorder) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	n, err := sendfileWriter{w.ResponseWriter}.ReadFrom(r)
	w.bytes += n
	return n, err
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusRecorder) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// accessLogAndMetrics logs one JSON line per request and records the
// Prometheus figures by route pattern (never the raw path: ids would
// explode the label set) and status code.
func (s *Server) accessLogAndMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cc := &callerCarrier{}
		rec := &statusRecorder{ResponseWriter: w}
		rec.beforeHeader = func(status int) { s.allowedRateHeaders(rec.Header(), cc, status) }
		r = r.WithContext(context.WithValue(r.Context(), callerCarrierKey{}, cc))
		next.ServeHTTP(rec, r)
		dur := time.Since(start)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		code := strconv.Itoa(rec.code())
		s.metrics.requests.WithLabelValues(r.Method, route, code).Inc()
		s.metrics.latency.WithLabelValues(r.Method, route, code).Observe(dur.Seconds())
		if cc.limited != "" {
			s.metrics.rateLimited.WithLabelValues(cc.limited).Inc()
		}
		level := slog.LevelInfo
		if rec.code() >= 500 {
			level = slog.LevelError
		}
		if !s.log.Enabled(r.Context(), level) {
			return // a server logging warnings and up: no line to build
		}
		attrs := []any{
			"request_id", RequestID(r.Context()),
			"method", r.Method, "route", route, "path", redact.String(r.URL.Path),
			"status", rec.code(), "bytes", rec.bytes, "duration_ms", float64(dur.Microseconds()) / 1000,
			"client_addr", auth.ClientIP(r.RemoteAddr),
		}
		if cc.c != nil {
			attrs = append(attrs, "key_id", cc.c.KeyID)
		}
		if cc.limited != "" {
			attrs = append(attrs, "rate_limited", cc.limited)
		}
		// The base logger with the request id as the first attribute: the
		// same line as the request-scoped logger writes, without deriving it.
		s.log.Log(r.Context(), level, "request", attrs...)
	})
}

// callerCarrier lets the auth middleware (deeper in the chain) hand the
// caller back to the access log (outer), since contexts flow only inward.
// The error path (noteRateLimited) also hands back which limit refused.
type callerCarrier struct {
	c       *auth.Caller
	limited string

	mu sync.Mutex
	// tool is the first tool the request called (the dispatcher's
	// observer sets it), for the X-RateLimit-* headers of a success.
	tool string
}

// hostOriginMiddleware refuses requests whose Host is not one this server
// answers to (DNS rebinding: a page on evil.example resolving to 127.0.0.1
// still sends Host: evil.example) with 421, and cross-origin browser
// requests from origins not allowed with 403. It also answers CORS for the
// configured origins.
func (s *Server) hostOriginMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			WriteError(w, r, fault.New(fault.Misdirected, "this server does not answer for that Host"))
			return
		}
		origin := r.Header.Get("Origin")
		if origin != "" {
			cors := slices.Contains(s.cfg.CORSOrigins, origin)
			if !cors && !s.sameOrigin(origin, r.Host) {
				WriteError(w, r, fault.New(fault.Forbidden, "cross-origin request refused"))
				return
			}
			if cors {
				h := w.Header()
				h.Set("Access-Control-Allow-Origin", origin)
				h.Add("Vary", "Origin")
				h.Set("Access-Control-Allow-Headers", "Authorization, X-API-Key, X-AIO-API-Key, Content-Type")
				h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
				h.Set("Access-Control-Max-Age", "600")
				if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
					w.WriteHeader(http.StatusNoContent)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed applies the Host rule. On a loopback bind: localhost,
// 127.0.0.1, [::1] and SANDBOX_ALLOWED_HOSTS. On a non-loopback bind also the
// listen IP and any IP literal (a rebinding attack always carries the
// attacker's domain name, never an IP).
func (s *Server) hostAllowed(hostport string) bool {
	return s.hostAllowedOn(hostport, s.loopbackBind)
}

// hostAllowedOn is the Host rule for a listener bound to loopback or not.
func (s *Server) hostAllowedOn(hostport string, loopbackBind bool) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range s.cfg.AllowedHosts {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	if !loopbackBind {
		return net.ParseIP(host) != nil
	}
	return false
}

// sameOrigin: an Origin whose host:port is the request's own Host (the
// /docs page calling the API) is not cross-origin.
func (s *Server) sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// bodyLimitMiddleware refuses declared oversize bodies with 413 before
// reading them and caps the rest. Paths registered with AllowLargeBodies
// cap their own bodies.
func (s *Server) bodyLimitMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.largeBody(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		limit := s.cfg.MaxBody.Bytes()
		if r.ContentLength > limit {
			WriteError(w, r, fault.Errorf(fault.TooLarge, "request body over the %d byte limit", limit))
			return
		}
		if r.Body != nil {
			// +1: huma reads at most limit bytes per operation and reports
			// 413 itself; this reader only stops plain handlers.
			r.Body = http.MaxBytesReader(w, r.Body, limit+1)
		}
		next.ServeHTTP(w, r)
	})
}

// publicPaths need no credential.
var publicPaths = []string{"/healthz", "/docs", "/openapi.json", "/openapi.yaml", "/openapi-3.0.json", "/openapi-3.0.yaml"}

// authMiddleware authenticates every non-public request. A request with no
// credential is refused before any disk I/O; a locked-out address gets 429
// whatever it sends.
func (s *Server) authMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(publicPaths, r.URL.Path) || s.sessionPublic(r) || s.selfAuthenticated(r.URL.Path) {
			// selfAuthenticated: the handler authenticates (selfauth.go).
			next.ServeHTTP(w, r)
			return
		}
		pattern := s.routePattern(r)
		// The console's cookie (console_hook.go) never opens a relay: what
		// a sandbox serves must not run with a signed-in person's session
		// (content.go: two origins). A relay takes a key or a ticket.
		if !s.relayPattern(pattern) && s.serveSession(w, r, next) {
			return
		}
		s.authenticate(w, r, next, pattern)
	})
}

// authenticate authenticates r by its key header or ticket (for the route
// pattern's ticket scopes), checks the route's roles and serves next with
// the caller; it answers the refusal itself.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, next http.Handler, pattern string) {
	addr := auth.ClientIP(r.RemoteAddr)
	cred, err := auth.ParseCredential(r.Header, r.URL.Query())
	if err != nil {
		if d := s.auth.Locked(addr); d > 0 {
			// Locked and nothing usable presented: 429, not counted.
			WriteError(w, r, fault.WithRetryAfter(fault.RateLimited, int((d+time.Second-1)/time.Second), "too many failed authentication attempts; retry later"))
			return
		}
		if auth.IsMissing(err) {
			// Nothing presented: nothing to count, nothing to audit.
			WriteError(w, r, err)
			return
		}
		// Counted and audited like a wrong key; the client still learns
		// what was wrong with it unless this failure locked it out.
		if lerr := s.auth.RecordFailure(r.Context(), addr, fault.Public(err)); fault.KindOf(lerr) == fault.RateLimited {
			err = lerr
		}
		WriteError(w, r, err)
		return
	}
	cred.Local = localDirect(r)
	if cred.Ticket != "" {
		cred.Scopes = TicketScopes(r.Method, pattern)
	}
	c, err := s.auth.Authenticate(r.Context(), addr, cred)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	if cc, ok := r.Context().Value(callerCarrierKey{}).(*callerCarrier); ok {
		cc.c = &c
	}
	// The route's roles, before any body is read or validated (see
	// access.go). An unmatched route falls through to 404/405.
	if pattern != "" {
		if err := s.authorizeRoute(r.Context(), c, r.Method, pattern); err != nil {
			WriteError(w, r, err)
			return
		}
	}
	next.ServeHTTP(w, r.WithContext(auth.WithCaller(r.Context(), c)))
}

// forwardingHeaders mark a request relayed by a proxy: its loopback peer
// address says nothing about who sent it.
var forwardingHeaders = []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Forwarded-Host", "Via"}

// localDirect reports whether r comes from a loopback peer and carries no
// forwarding header: someone on this host talking to the server directly.
func localDirect(r *http.Request) bool {
	ip := net.ParseIP(auth.ClientIP(r.RemoteAddr))
	if ip == nil || !ip.IsLoopback() {
		return false
	}
	for _, h := range forwardingHeaders {
		if _, ok := r.Header[h]; ok {
			return false
		}
	}
	return true
}

type callerCarrierKey struct{}

var errNoCaller = errors.New("no caller in context")

// MustCaller returns the request's caller or an Unauthorized fault (a route
// reached without the auth middleware is a bug, not an open door).
func MustCaller(ctx context.Context) (auth.Caller, error) {
	c, ok := auth.CallerFrom(ctx)
	if !ok {
		return auth.Caller{}, fault.Wrap(fault.Unauthorized, errNoCaller, "authentication required")
	}
	return c, nil
}

// kindMediaType is the 415 answer: the route takes JSON (or, for upload
// routes, the types their AIO row takes) and the request sent another
// content type. It lives here, not in fault, because only the HTTP edge
// produces it.
const kindMediaType fault.Kind = "unsupported_media_type"

// methodOverrideHeaders let a client (or a proxy, or a framework behind a
// proxy) change the method the server acts on. A browser may send a
// cross-origin POST with any of them only after a preflight, but an
// intermediary that honours them would turn a harmless-looking POST into a
// DELETE or PUT that no policy looked at; sandhold never honours them and
// refuses requests that carry them, so nothing downstream can either.
var methodOverrideHeaders = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// methodOverrideParams are the query-string spellings of the same trick.
var methodOverrideParams = []string{"_method", "x-http-method-override"}

// requestShapeMiddleware refuses method overrides (400) and, on a request
// with a body, any content type the route does not take (415). It runs
// after authentication and the role check, so the wrong caller learns
// nothing about a route's shape.
//
// Why 415 matters: text/plain, application/x-www-form-urlencoded and
// multipart/form-data are the types a browser sends cross-origin without a
// CORS preflight. A JSON route that parsed such a body anyway would run a
// command for any web page that got past the Origin check (a missing Origin
// from an old browser or a same-site page). A body with no Content-Type at
// all is read as JSON, as AIO's FastAPI server does: HTML forms cannot send
// one, and fetch() from another origin always carries an Origin header,
// which hostOriginMiddleware refuses.
func (s *Server) requestShapeMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range methodOverrideHeaders {
			if _, ok := r.Header[h]; ok {
				WriteError(w, r, fault.Errorf(fault.Invalid, "method override headers are refused (%s); send the real method", h))
				return
			}
		}
		if r.URL.RawQuery != "" {
			q := r.URL.Query()
			for _, p := range methodOverrideParams {
				if q.Has(p) {
					WriteError(w, r, fault.Errorf(fault.Invalid, "method override parameters are refused (%s); send the real method", p))
					return
				}
			}
		}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			if err := s.checkContentType(r); err != nil {
				WriteError(w, r, err)
				return
			}
		} else if s.emptyMeansDefaults(r) {
			r = withEmptyObject(r)
		}
		next.ServeHTTP(w, r)
	})
}

// checkContentType applies the route's media types (the table's BodyTypes) to a request with a body.
func (s *Server) checkContentType(r *http.Request) error {
	raw := r.Header.Get("Content-Type")
	if s.rawBody(r) {
		return nil // relayed as sent (RelayRoute)
	}
	// Routes whose body is not JSON say so in their AIO row (the upload,
	// artifact chunks); every other route takes JSON only.
	pattern := s.routePattern(r)
	allowed := s.bodyTypes(r.Method, pattern)
	if allowed == nil {
		allowed = nativeBodyTypes[r.Method+" "+pattern]
	}
	if raw == "" {
		return nil // read as JSON (see requestShapeMiddleware); upload routes take raw bytes
	}
	mt, _, err := mime.ParseMediaType(raw)
	if err != nil {
		return fault.New(kindMediaType, "malformed Content-Type")
	}
	if allowed != nil {
		if slices.Contains(allowed, mt) {
			return nil
		}
		return fault.Errorf(kindMediaType, "this route takes %s", strings.Join(allowed, " or "))
	}
	if isJSONType(mt) {
		return nil
	}
	return fault.New(kindMediaType, "this route takes application/json")
}

// nativeBodyTypes are the native routes whose body is not JSON: uploads
// the route's tool reads as a stream.
var nativeBodyTypes = map[string][]string{
	"POST /v1/templates/import": {"application/x-tar", "application/octet-stream"},
	"POST /v1/snapshots/import": {"application/x-tar", "application/octet-stream"},
	"POST /v1/templates/build":  {"application/x-tar", "application/gzip", "application/octet-stream"},
}

// isJSONType: application/json or a structured +json type.
func isJSONType(mt string) bool {
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// routePattern is the router's pattern for r ("" when no route matches),
// found before the router runs so middleware can act on the route.
func (s *Server) routePattern(r *http.Request) string { return findPattern(s.router, r) }

// findPattern is router's pattern for r ("" when no route matches).
func findPattern(router chi.Router, r *http.Request) string {
	mx, ok := router.(*chi.Mux)
	if !ok {
		return ""
	}
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	return mx.Find(chi.NewRouteContext(), r.Method, path)
}

// routeKey strips the /sandboxes/{id} prefix of the AIO routes served per
// sandbox, so both spellings share one table entry.
func routeKey(pattern string) string {
	if rest, ok := strings.CutPrefix(pattern, "/sandboxes/{id}/v1/"); ok {
		return "/v1/" + rest
	}
	return pattern
}

// emptyMeansDefaults says whether r, sent without a body, is read as
// "{}": AIO's SDK calls shell.create_session() and
// jupyter.create_session() with no body at all, and an empty body means
// all defaults on every JSON route. A route with required fields then
// answers 422 naming them, as it would for "{}". Routes that take other
// media types (uploads, artifact chunks) are left alone: an empty upload
// is an empty file.
func (s *Server) emptyMeansDefaults(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return false
	}
	if r.ContentLength != 0 { // -1: a chunked body, read as sent
		return false
	}
	p := s.routePattern(r)
	return p != "" && s.bodyTypes(r.Method, p) == nil && !s.rawBody(r)
}

// emptyObject is the body an empty request is read as.
const emptyObject = "{}"

// withEmptyObject gives r the body "{}" as application/json.
func withEmptyObject(r *http.Request) *http.Request {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(strings.NewReader(emptyObject))
	r2.ContentLength = int64(len(emptyObject))
	r2.Header.Set("Content-Type", "application/json")
	r2.Header.Set("Content-Length", strconv.Itoa(len(emptyObject)))
	return r2
}

// Sendfile is w for http.ServeContent: its body reaches the connection's
// ReadFrom (sendfileWriter).
func Sendfile(w http.ResponseWriter) http.ResponseWriter { return sendfileWriter{w} }

// sendfileWriter lets http.ServeContent reach the connection's ReadFrom
// (sendfile from the sandbox's file straight to the socket) through the
// middleware's wrappers. Headers still go through the wrappers (status and
// access log); the access log's recorder counts the body's bytes on the
// way (statusRecorder.ReadFrom), the size metric does not.
type sendfileWriter struct{ http.ResponseWriter }

func (s sendfileWriter) ReadFrom(r io.Reader) (int64, error) {
	w := s.ResponseWriter
	// maxUnwrap bounds the walk down the middleware's wrappers.
	const maxUnwrap = 8
	for range maxUnwrap {
		if rf, ok := w.(io.ReaderFrom); ok {
			return rf.ReadFrom(r)
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return io.Copy(writerOnly{s.ResponseWriter}, r)
}

// writerOnly hides ReadFrom so io.Copy does not recurse.
type writerOnly struct{ io.Writer }
