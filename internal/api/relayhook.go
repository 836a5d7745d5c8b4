package api

import (
	"context"
	"net/http"
	"slices"
)

// HostRelays serve the relays of the content hosts (content.go): the
// DevTools relay on 9222-{id}, the VNC relay on its /websockify, and the
// preview, whole path kept, on {port}-{id}. internal/api/relay provides
// them (UseHostRelays).
type HostRelays interface {
	CDP(w http.ResponseWriter, r *http.Request)
	VNC(w http.ResponseWriter, r *http.Request)
	Preview(w http.ResponseWriter, r *http.Request)
}

// UseHostRelays makes h the content hosts' relays. Call before serving.
func (s *Server) UseHostRelays(h HostRelays) { s.relays = h }

// RelayRoute marks pattern, on the console's router, as a relay route: the
// console's cookie never authenticates it (middleware.go); with rawBody
// its request bodies are relayed as sent, whatever their media type. Call
// before serving.
func (s *Server) RelayRoute(pattern string, rawBody bool) {
	s.relayPatterns = append(s.relayPatterns, pattern)
	if rawBody {
		s.rawBodyPatterns = append(s.rawBodyPatterns, pattern)
	}
}

// EndContentSessions ends every content-origin session of keyID (its key
// was revoked).
func (s *Server) EndContentSessions(keyID string) { s.sessions.endKey(keyID) }

// OnContentHost says whether the request of ctx came to a content host
// {port}-{id}.<domain>, an origin of its own.
func OnContentHost(ctx context.Context) bool {
	_, ok := contentFrom(ctx)
	return ok
}

// relayPattern reports whether pattern is a relay route: the console's
// cookie never authenticates one.
func (s *Server) relayPattern(pattern string) bool {
	return pattern != "" && slices.Contains(s.relayPatterns, pattern)
}

// rawBody reports whether r's route relays its body as sent.
func (s *Server) rawBody(r *http.Request) bool {
	return s.RelaysBody(s.routePattern(r))
}

// RelaysBody reports whether the route pattern relays request bodies as
// sent, whatever their media type (the preview proxy): no 415 there.
func (s *Server) RelaysBody(pattern string) bool {
	return pattern != "" && slices.Contains(s.rawBodyPatterns, pattern)
}
