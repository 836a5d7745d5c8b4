package api

import (
	"net/http"

	"github.com/sandhold/sandhold/internal/auth"
)

// SessionAuth is the web console's cookie sign-in (internal/console): a
// key exchanged once for a server-side session, so the browser never
// holds the key. The auth middleware asks it two things: whether a path
// needs no credential at all (the console's static pages and its own
// sign-in endpoint, which authenticate themselves), and, for a request
// that presents a session cookie and no other credential, who the caller
// is. Authenticate applies the cookie rules (CSRF token on every
// state-changing method, no cross-site use, no WebSocket upgrade) and
// re-reads the key, so a revoked key ends its sessions on the next
// request. The caller it returns goes through the same route role check,
// dispatcher, rate limits and audit as a key-authenticated one.
type SessionAuth interface {
	Public(r *http.Request) bool
	Carries(r *http.Request) bool
	Authenticate(r *http.Request) (auth.Caller, error)
}

// UseSessionAuth installs the console's session authentication. Call
// before serving.
func (s *Server) UseSessionAuth(a SessionAuth) { s.session = a }

// sessionPublic reports whether the console serves r without a credential.
func (s *Server) sessionPublic(r *http.Request) bool {
	return s.session != nil && s.session.Public(r)
}

// serveSession authenticates r by its console session and then does what
// authMiddleware does for a key: hand the caller to the access log, check
// the route's roles before any body is read, and pass the caller on. It
// reports false when r carries no session (the key path decides).
func (s *Server) serveSession(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
	if s.session == nil || !s.session.Carries(r) {
		return false
	}
	c, err := s.session.Authenticate(r)
	if err != nil {
		WriteError(w, r, err)
		return true
	}
	if cc, ok := r.Context().Value(callerCarrierKey{}).(*callerCarrier); ok {
		cc.c = &c
	}
	if pattern := s.routePattern(r); pattern != "" {
		if err := s.authorizeRoute(r.Context(), c, r.Method, pattern); err != nil {
			WriteError(w, r, err)
			return true
		}
	}
	next.ServeHTTP(w, r.WithContext(auth.WithCaller(r.Context(), c)))
	return true
}
