package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/store"
)

// Session rules.
//
// A signed-in browser holds one random session id in an HttpOnly cookie
// (SameSite=Strict; Secure and the __Host- prefix when the request came
// over TLS). The server keeps, per session, only the key's id, a CSRF
// token and two deadlines; the key text is never stored anywhere, in the
// browser or here. What each rule stops:
//   - a page on another site riding the cookie (CSRF): SameSite=Strict keeps
//     the browser from sending it; the server also refuses a cookie request
//     that a browser marks as cross-site or same-site-but-other-origin
//     (Sec-Fetch-Site) or whose Origin is another origin, and every
//     state-changing method must carry X-CSRF-Token equal to the session's
//     token, which only a same-origin script can read;
//   - cross-site WebSocket hijacking: a WebSocket upgrade is never
//     authenticated by the cookie (the console opens terminals with a
//     one-time ticket, like every other browser client);
//   - a stolen cookie living forever: idle and absolute expiry, logout, and
//     the key's revocation (checked against the store on every request, and
//     pushed by the revocation hook) end it;
//   - script reading the session: HttpOnly.

// Cookie names: __Host- (Secure, Path=/, no Domain, enforced by browsers)
// over TLS; a plain name over plain HTTP, where browsers refuse the prefix.
const (
	cookieName       = "sandhold_session"
	cookieNameSecure = "__Host-sandhold_session"
	// CSRFHeader carries the session's CSRF token on state-changing requests.
	CSRFHeader = "X-CSRF-Token"
)

// Session lifetimes and caps.
const (
	// SessionIdle ends a session nobody used for this long.
	SessionIdle = time.Hour
	// SessionMax ends any session this long after sign-in.
	SessionMax = 12 * time.Hour
	// maxSessionsPerKey: the oldest session of a key is dropped beyond it
	// (a script signing in in a loop must not grow memory without bound).
	maxSessionsPerKey = 32
	// maxSessions bounds the whole table.
	maxSessions = 10000
	// tokenBytes of randomness in a session id and a CSRF token.
	tokenBytes = 32
)

// KeyReader is the part of the store sessions need: the key's current row.
type KeyReader interface {
	KeyByID(ctx context.Context, id string) (store.Key, error)
}

type session struct {
	keyID   string
	csrf    string
	created time.Time
	seen    time.Time
}

// Sessions is the server-side session table.
type Sessions struct {
	keys KeyReader
	now  func() time.Time

	mu sync.Mutex
	// byID maps SHA-256(session id) → session: a memory dump or a timing
	// side channel on the map never yields a usable cookie.
	byID map[[32]byte]*session
}

// NewSessions returns an empty table reading keys from keys; now is the
// clock (nil: time.Now).
func NewSessions(keys KeyReader, now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	return &Sessions{keys: keys, now: now, byID: map[[32]byte]*session{}}
}

func newToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Info is what the browser learns about its session (never the key).
type Info struct {
	KeyID     string    `json:"key_id"`
	KeyName   string    `json:"key_name"`
	Role      auth.Role `json:"role"`
	CSRFToken string    `json:"csrf_token"`
	ExpiresAt time.Time `json:"expires_at"`
	// Content is where sandbox content (previews, DevTools, desktops)
	// lives; the console opens it there, with a ticket, never on its own
	// origin. Empty: on the path forms of this origin.
	Content api.ContentOrigin `json:"content"`
}

// create starts a session for c and returns its id and info.
func (s *Sessions) create(c auth.Caller) (string, Info, error) {
	id, err := newToken()
	if err != nil {
		return "", Info{}, err
	}
	csrf, err := newToken()
	if err != nil {
		return "", Info{}, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	s.capLocked(c.KeyID)
	s.byID[sha256.Sum256([]byte(id))] = &session{keyID: c.KeyID, csrf: csrf, created: now, seen: now}
	return id, Info{KeyID: c.KeyID, KeyName: c.KeyName, Role: c.Role, CSRFToken: csrf, ExpiresAt: now.Add(SessionMax)}, nil
}

// capLocked drops the oldest sessions of keyID (and, if the table is full,
// the oldest of all) to make room for one more. s.mu must be held.
func (s *Sessions) capLocked(keyID string) {
	for {
		var (
			oldestKey, oldestAll   [32]byte
			tOldestKey, tOldestAll time.Time
			countKey               int
			haveKey, haveAll       bool
		)
		for h, ss := range s.byID {
			if !haveAll || ss.created.Before(tOldestAll) {
				oldestAll, tOldestAll, haveAll = h, ss.created, true
			}
			if ss.keyID == keyID {
				countKey++
				if !haveKey || ss.created.Before(tOldestKey) {
					oldestKey, tOldestKey, haveKey = h, ss.created, true
				}
			}
		}
		switch {
		case countKey >= maxSessionsPerKey:
			delete(s.byID, oldestKey)
		case len(s.byID) >= maxSessions:
			delete(s.byID, oldestAll)
		default:
			return
		}
	}
}

// sweepLocked drops expired sessions. s.mu must be held.
func (s *Sessions) sweepLocked(now time.Time) {
	for h, ss := range s.byID {
		if s.expired(ss, now) {
			delete(s.byID, h)
		}
	}
}

func (s *Sessions) expired(ss *session, now time.Time) bool {
	return now.Sub(ss.seen) >= SessionIdle || now.Sub(ss.created) >= SessionMax
}

// lookup returns a copy of the live session with id (touching it), or false.
func (s *Sessions) lookup(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	h := sha256.Sum256([]byte(id))
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[h]
	if !ok {
		return session{}, false
	}
	if s.expired(ss, now) {
		delete(s.byID, h)
		return session{}, false
	}
	ss.seen = now
	return *ss, true
}

// end removes the session with id.
func (s *Sessions) end(id string) {
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, h)
}

// EndKey removes every session of keyID (the key was revoked).
func (s *Sessions) EndKey(keyID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, ss := range s.byID {
		if ss.keyID == keyID {
			delete(s.byID, h)
		}
	}
}

// Len is the number of sessions held (for tests and metrics).
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// cookieFor returns the cookie name r's session lives under.
func cookieFor(r *http.Request) string {
	if r.TLS != nil {
		return cookieNameSecure
	}
	return cookieName
}

// sessionID returns the session cookie of r ("" if none).
func sessionID(r *http.Request) string {
	c, err := r.Cookie(cookieFor(r))
	if err != nil {
		return ""
	}
	return c.Value
}

// setCookie writes the session cookie (value "" with MaxAge -1 clears it).
func setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	c := &http.Cookie{ // #nosec G124 -- Secure is dropped only on plain HTTP, where a browser would refuse the cookie; HttpOnly and SameSite=Strict always
		Name: cookieNameSecure, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	}
	if r.TLS == nil {
		// Plain HTTP (a loopback bind, or TLS ended by a proxy in front):
		// a browser drops a Secure cookie, and the __Host- prefix needs
		// Secure. HttpOnly and SameSite=Strict stay.
		c.Name, c.Secure = cookieName, false
	}
	http.SetCookie(w, c)
}

// hasOtherCredential: a key header or a ticket decides instead of the cookie.
func hasOtherCredential(r *http.Request) bool {
	for _, h := range []string{"Authorization", "X-API-Key", "X-AIO-API-Key"} {
		if _, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			return true
		}
	}
	return r.URL.Query().Has(auth.TicketParam)
}

// Carries reports whether r is to be authenticated by its session cookie:
// it has one and no key or ticket.
func (s *Sessions) Carries(r *http.Request) bool {
	return sessionID(r) != "" && !hasOtherCredential(r)
}

var (
	errCrossSite = fault.New(fault.Forbidden, "the console session cookie is refused on a cross-site request")
	errUpgrade   = fault.New(fault.Forbidden, "the console session does not open WebSockets; use a ticket from POST /v1/tickets")
	errCSRF      = fault.New(fault.Forbidden, "missing or wrong "+CSRFHeader+" header: state-changing requests with the console session need the session's CSRF token")
	errNoSession = fault.New(fault.Unauthorized, "the console session has ended (signed out, expired or its key revoked); sign in again")
)

// crossSite reports whether a browser says r came from another site or
// another origin. Sec-Fetch-Site is set by every current browser and
// cannot be set by page script; Origin is checked too for older ones.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default: // cross-site, same-site (another origin of the site)
		return true
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) || (u.Scheme != "http" && u.Scheme != "https") {
			return true
		}
	}
	return false
}

// safeMethod: methods that change nothing and need no CSRF token.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// Authenticate resolves r's session cookie to the caller, applying the
// rules at the top of this file.
func (s *Sessions) Authenticate(r *http.Request) (auth.Caller, error) {
	c, _, err := s.authenticate(r)
	return c, err
}

// authenticate is Authenticate that also returns the session id.
func (s *Sessions) authenticate(r *http.Request) (auth.Caller, string, error) {
	if crossSite(r) {
		return auth.Caller{}, "", errCrossSite
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return auth.Caller{}, "", errUpgrade
	}
	id := sessionID(r)
	ss, ok := s.lookup(id)
	if !ok {
		return auth.Caller{}, "", errNoSession
	}
	if !safeMethod(r.Method) {
		got := r.Header.Get(CSRFHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) != 1 {
			return auth.Caller{}, "", errCSRF
		}
	}
	k, err := s.keys.KeyByID(r.Context(), ss.keyID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && k.Revoked()) {
		s.end(id)
		return auth.Caller{}, "", errNoSession
	}
	if err != nil {
		return auth.Caller{}, "", fault.Wrap(fault.Unavailable, err, "authentication is temporarily unavailable")
	}
	role, err := auth.ParseRole(k.Role)
	if err != nil {
		s.end(id)
		return auth.Caller{}, "", errNoSession
	}
	// The key's own rate limits hold in the console too.
	limits, err := auth.KeyRateLimits(k)
	if err != nil {
		s.end(id)
		return auth.Caller{}, "", errNoSession
	}
	return auth.Caller{KeyID: k.ID, KeyName: k.Name, Role: role, Addr: auth.ClientIP(r.RemoteAddr), RateLimits: limits, ViaSession: true}, id, nil
}
