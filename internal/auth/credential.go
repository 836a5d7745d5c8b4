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
		scheme, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Credential{}, fault.New(fault.Unauthorized, "unsupported Authorization scheme: use Bearer")
		}
		found = append(found, strings.TrimSpace(rest))
	}
	found = append(found, h.Values("X-API-Key")...)
	found = append(found, h.Values("X-AIO-API-Key")...)

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
