package api

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
)

// Self-authenticated protocols.
//
// A protocol whose clients cannot send a key header on every request
// authenticates its requests itself: E2B's in-sandbox API (internal/e2b),
// whose SDK sends a per-sandbox access token (X-Access-Token) and uses the
// Authorization header for something else (the sandbox user name). Routes
// mounted with MountSelfAuthenticated still pass the request id, recovery,
// access log, Host/Origin check and method-override refusal; they skip the
// key check, the console's cookie (never honoured there), the route role
// table and the media-type check, and they cap their own bodies. The
// handler must authenticate every request before it acts — turn the
// request's credential into an auth.Caller (counting a bad one against the
// address's lockout) — and every action it then takes is a dispatched
// call of that caller, as on every other route.

// MountSelfAuthenticated serves h for every method at prefix and below
// it. Call before serving.
func (s *Server) MountSelfAuthenticated(prefix string, h http.Handler) {
	prefix = strings.TrimSuffix(prefix, "/")
	s.selfAuthPrefixes = append(s.selfAuthPrefixes, prefix)
	s.largeBodyPrefixes = append(s.largeBodyPrefixes, prefix+"/")
	s.rawBodyPatterns = append(s.rawBodyPatterns, prefix+"/*")
	s.router.Handle(prefix+"/*", h)
}

// MountSelfAuthenticatedPath serves h for every method at exactly path
// (E2B's SDK builds its signed file URLs at the host's root, /files).
// Call before serving.
func (s *Server) MountSelfAuthenticatedPath(path string, h http.Handler) {
	s.selfAuthPaths = append(s.selfAuthPaths, path)
	s.largeBodyPrefixes = append(s.largeBodyPrefixes, path)
	s.rawBodyPatterns = append(s.rawBodyPatterns, path)
	s.router.Handle(path, h)
}

// selfAuthenticated reports whether path lies below a prefix mounted with
// MountSelfAuthenticated.
func (s *Server) selfAuthenticated(path string) bool {
	for _, p := range s.selfAuthPrefixes {
		if strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return slices.Contains(s.selfAuthPaths, path)
}

// NoteCaller tells the access log (and the X-RateLimit-* headers of a
// success) who a self-authenticated request acts for, once its handler
// has authenticated it.
func NoteCaller(ctx context.Context, c auth.Caller) {
	if cc, ok := ctx.Value(callerCarrierKey{}).(*callerCarrier); ok {
		cc.c = &c
	}
}
