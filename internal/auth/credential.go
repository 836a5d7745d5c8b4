package auth

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandhold/sandhold/internal/fault"
)

// Credential is what a request presented.
type Credential struct {
	// Key is an API key (from a header), or "".
	Key string
	// Ticket is a one-time ticket (from the ticket query parameter), or "".
	Ticket string
	// Scopes are the ticket scopes the request's route takes, set by the
	// HTTP layer from its route table; empty: the route takes no ticket,
	// and a ticket presented there is refused (counted like a wrong key).
	Scopes []TicketScope
	// Local is set by the HTTP layer for a request from a loopback peer
	// that carries no forwarding header (X-Forwarded-For, Forwarded,
	// X-Real-IP): the operator at the console. While the address is locked
	// out, such a request still gets its credential checked, slowly
	// (Service.Authenticate).
	Local bool
}

// highEntropy reports whether the credential has the exact shape of a
// generated key or ticket (prefix + 43 base64url characters of 32 random
// bytes). Guessing one is hopeless, so the lockout protects nothing for
// these and refusing them would only deny service to their holders.
func (c Credential) highEntropy() bool {
	s := c.Key
	prefix := KeyPrefix
	if c.Ticket != "" {
		s, prefix = c.Ticket, TicketPrefix
	}
	if !strings.HasPrefix(s, prefix) || len(s) != len(prefix)+secretChars {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		b := s[i]
		if (b < 'a' || b > 'z') && (b < 'A' || b > 'Z') && (b < '0' || b > '9') && b != '-' && b != '_' {
			return false
		}
	}
	return true
}

// Empty reports whether nothing was presented.
func (c Credential) Empty() bool { return c.Key == "" && c.Ticket == "" }

// queryKeyNames are query parameters that would carry a key in a URL. Any of
// them is refused outright: URLs end up in proxy logs, browser history and
// Referer headers.
var queryKeyNames = []string{"api_key", "apikey", "api-key", "key", "token", "access_token", "x-api-key", "x-aio-api-key", "authorization", "auth"}

// TicketParam is the query parameter that carries a one-time ticket.
const TicketParam = "ticket"

// errMissing is the 401 for a request with no credential at all; callers
// branch on it (IsMissing) to skip counting and auditing.
var errMissing = fault.New(fault.Unauthorized, "missing API key: send Authorization: Bearer <key> or X-API-Key")

// ParseCredential extracts the credential from headers and the query. It
// never looks at a key in the query string except to refuse it. A malformed
// or conflicting credential is an Unauthorized fault.
func ParseCredential(h http.Header, q url.Values) (Credential, error) {
	for _, name := range queryKeyNames {
		if q.Has(name) {
			return Credential{}, fault.New(fault.Unauthorized, "API keys in the query string are refused; send a header, or use a ticket from POST /v1/tickets")
		}
	}
	var found []string
	for _, v := range h.Values("Authorization") {
		// RFC 9110: credentials = auth-scheme [ 1*SP token68 ]; the scheme
		// is case-insensitive, the token is not. Only the ASCII space and
		// tab the grammar allows (OWS) are removed: a Unicode-aware trim
		// would turn "key\u00a0" or "key\v" into the valid key.
		scheme, rest, ok := strings.Cut(trimOWS(v), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Credential{}, fault.New(fault.Unauthorized, "unsupported Authorization scheme: use Bearer")
		}
		found = append(found, trimOWS(rest))
	}
	for _, name := range []string{"X-API-Key", "X-AIO-API-Key"} {
		for _, v := range h.Values(name) {
			found = append(found, trimOWS(v))
		}
	}

	var c Credential
	for _, f := range found {
		if !validCredential(f) {
			return Credential{}, fault.New(fault.Unauthorized, "malformed API key")
		}
		if c.Key != "" && c.Key != f {
			return Credential{}, fault.New(fault.Unauthorized, "conflicting API keys in one request")
		}
		c.Key = f
	}
	if tv, ok := q[TicketParam]; ok {
		if len(tv) != 1 || !validCredential(tv[0]) {
			return Credential{}, fault.New(fault.Unauthorized, "malformed ticket")
		}
		if c.Key != "" {
			return Credential{}, fault.New(fault.Unauthorized, "send either a key or a ticket, not both")
		}
		c.Ticket = tv[0]
	}
	if c.Empty() {
		return Credential{}, errMissing
	}
	return c, nil
}

// IsMissing reports whether err is ParseCredential's "nothing presented".
func IsMissing(err error) bool { return errors.Is(err, errMissing) }

// trimOWS removes the optional whitespace of the HTTP grammar (RFC 9110
// section 5.6.3: SP and HTAB) from both ends, and nothing else. Every other
// byte stays and is compared byte for byte, so a key with a trailing NBSP,
// zero-width space, vertical tab or NUL is a different (malformed) key.
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}
