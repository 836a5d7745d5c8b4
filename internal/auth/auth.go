// Package auth decides who is calling: API keys (only their SHA-256 is
// stored), roles, one-time tickets for browsers and WebSockets, and the
// failed-auth lockout.
//
// It stops credential guessing (10 failures per 60 s per client address, then
// 429 — without locking out holders of generated keys or the operator at the
// console, see Service.checkWhileLocked), key leakage through URLs and logs
// (query-string keys are refused), timing oracles (constant-time comparison
// of the full hash) and crashes on hostile bytes (every credential is
// validated as printable ASCII before use and compared byte for byte: a
// malformed credential is a plain 401). Revocation takes effect on the very
// next request: every request reads the key's row, or — with WithKeyCache —
// a cached row only while the data dir's epoch file, rewritten by every
// process that revokes or changes a key, still holds the value the row was
// read under (keycache.go).
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/ratelimit"
)

// Role is what a key may do.
type Role string

// The roles. There is no ordering beyond "admin can do everything".
const (
	RoleAdmin  Role = "admin"  // everything, including keys, policy, HALT
	RoleAgent  Role = "agent"  // its own sandboxes and tools within policy
	RoleViewer Role = "viewer" // read-only observation
)

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleAgent, RoleViewer:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want admin, agent or viewer)", s)
}

// Caller is the authenticated principal of a request.
type Caller struct {
	KeyID   string
	KeyName string
	Role    Role
	// Addr is the client address (IP, no port).
	Addr string
	// ViaTicket is true when the request authenticated with a one-time
	// ticket; TicketScope is then the scope it was minted for.
	ViaTicket   bool
	TicketScope TicketScope
	// ViaSession is true when the request authenticated with the web
	// console's session cookie.
	ViaSession bool
	// RateLimits are the key's own rate limits, set by an admin when the
	// key was created (nil: the server's). The dispatcher applies them over
	// every other rule for this key. Read-only: shared by copies.
	RateLimits ratelimit.Rules
}

// IsAdmin reports whether the caller has the admin role.
func (c Caller) IsAdmin() bool { return c.Role == RoleAdmin }

type callerKey struct{}

// WithCaller returns ctx carrying c (and tells a sink of ctx, see
// WithCallerSink).
func WithCaller(ctx context.Context, c Caller) context.Context {
	if s, ok := ctx.Value(callerSinkKey{}).(*callerSink); ok {
		s.set(c)
	}
	return context.WithValue(ctx, callerKey{}, c)
}

type callerSinkKey struct{}

// callerSink keeps the first caller put below it.
type callerSink struct {
	mu    sync.Mutex
	c     Caller
	isSet bool
}

func (s *callerSink) set(c Caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isSet {
		s.c, s.isSet = c, true
	}
}

// WithCallerSink returns a context for a request and a function that
// reports the first caller a handler below put into it (WithCaller: the
// API's authentication). A handler in front of the API (the cluster's
// merged sandbox list) learns who the request authenticated as without
// authenticating it a second time (which would spend a ticket twice and
// audit twice). ok is false when nothing below authenticated the request.
func WithCallerSink(ctx context.Context) (context.Context, func() (Caller, bool)) {
	s := &callerSink{}
	return context.WithValue(ctx, callerSinkKey{}, s), func() (Caller, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.c, s.isSet
	}
}

// CallerFrom returns the caller stored by WithCaller.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// Key and ticket text formats.
const (
	KeyPrefix    = "shk_"
	TicketPrefix = "sht_"
	secretBytes  = 32
	// secretChars is the base64url length of secretBytes (no padding).
	secretChars = 43
	// AdminKeyID is the id of the bootstrap admin key (SANDBOX_API_KEY or
	// the generated key file).
	AdminKeyID = "key_admin"
)

// newSecret returns prefix + 43 chars of base64url over 32 random bytes.
func newSecret(prefix string) (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// GenerateKey returns a new API key text.
func GenerateKey() (string, error) { return newSecret(KeyPrefix) }

// HashKey is the stored form of a key: SHA-256 of its full text.
func HashKey(key string) []byte {
	h := keySum(key)
	return h[:]
}

// keySum is the key's stored hash as an array (the key cache's map key);
// HashKey is its slice form. One definition, so the two cannot drift.
func keySum(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// newKeyID returns a fresh public key id.
func newKeyID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return "key_" + hex.EncodeToString(b), nil
}

// maxCredentialLen bounds a presented credential; ours are 47 chars and an
// operator key is far shorter than this.
const maxCredentialLen = 512

// validCredential: printable ASCII, no spaces, bounded length. Everything
// else is malformed and gets a 401 without reaching the store.
func validCredential(s string) bool {
	if s == "" || len(s) > maxCredentialLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b > '~' {
			return false
		}
	}
	return true
}

// looksLikeKey reports whether s has the shape of a generated key.
func looksLikeKey(s string) bool {
	return strings.HasPrefix(s, KeyPrefix) && len(s) == len(KeyPrefix)+secretChars
}

// clientIP strips the port from a RemoteAddr-style address.
func clientIP(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 && !strings.HasSuffix(addr, "]") {
		host := addr[:i]
		if strings.Count(host, ":") == 0 || strings.HasPrefix(host, "[") {
			return strings.Trim(host, "[]")
		}
	}
	return strings.Trim(addr, "[]")
}

// ClientIP is exported for the HTTP layer: the lockout key for a RemoteAddr.
func ClientIP(remoteAddr string) string { return clientIP(remoteAddr) }

// ticks converts a duration to whole seconds, rounding up, at least 1.
func ticks(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}
