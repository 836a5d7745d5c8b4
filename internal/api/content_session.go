package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

// Content sessions: a browser viewing a preview on its content host
// ({port}-{id}.<domain>) loads the page's scripts, styles and images with
// requests of their own, and a one-time ticket admits one request. So a
// preview ticket on a browser's navigation there starts a session: a
// random id in a cookie of that host only (HttpOnly, SameSite=Strict, no
// Domain; __Host- over TLS), bound on the server to the key, the host, the
// sandbox and the port. What each rule stops:
//   - the console's cookie is another host's: never sent here, and never
//     read here (serveContent has no console session);
//   - another sandbox's page (same site, other origin) riding the cookie:
//     SameSite=Strict does not stop a same-site request, so a request the
//     browser marks as same-site or cross-site (Sec-Fetch-Site) is refused,
//     and so is an Origin other than the host's own;
//   - a cookie tossed in by another content host (a Domain cookie of the
//     parent domain): every cookie of the name is looked up, and only a
//     session bound to this very host, sandbox and port counts;
//   - a session outliving its key: the key is re-read on every request and
//     revocation drops the key's sessions (Relays.Revoke).
// Sessions live in this node's memory (a restart ends them; a cluster
// behind a load balancer needs sticky content hosts).

// Content session lifetimes and caps.
const (
	contentCookie       = "sandhold_content"
	contentCookieSecure = "__Host-sandhold_content"
	contentSessionIdle  = time.Hour
	contentSessionMax   = 12 * time.Hour
	// maxContentSessionsPerKey: the oldest session of a key is dropped
	// beyond it (a page opened in a loop must not grow memory).
	maxContentSessionsPerKey = 64
	// maxContentSessions bounds the whole table.
	maxContentSessions = 10000
	// maxContentCookies caps the cookies of the name looked at per
	// request (a page can set more of its own; they are not sessions).
	maxContentCookies = 8
)

type contentSession struct {
	keyID   string
	host    string
	target  contentTarget
	created time.Time
	seen    time.Time
}

// contentSessions is the content origin's session table.
type contentSessions struct {
	now func() time.Time

	// mu guards byID, keyed by SHA-256 of the session id.
	mu   sync.Mutex
	byID map[[32]byte]*contentSession
}

func newContentSessions(now func() time.Time) *contentSessions {
	if now == nil {
		now = time.Now
	}
	return &contentSessions{now: now, byID: map[[32]byte]*contentSession{}}
}

// create starts a session of keyID for host and returns its id.
func (cs *contentSessions) create(keyID, host string, t contentTarget) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	now := cs.now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for h, ss := range cs.byID {
		if cs.expired(ss, now) {
			delete(cs.byID, h)
		}
	}
	cs.makeRoomLocked(keyID)
	cs.byID[sha256.Sum256([]byte(id))] = &contentSession{keyID: keyID, host: host, target: t, created: now, seen: now}
	return id, nil
}

// makeRoomLocked drops the oldest session of keyID (or of all) until one
// more fits. cs.mu must be held.
func (cs *contentSessions) makeRoomLocked(keyID string) {
	for {
		var oldestKey, oldestAll [32]byte
		var tKey, tAll time.Time
		n := 0
		for h, ss := range cs.byID {
			if tAll.IsZero() || ss.created.Before(tAll) {
				oldestAll, tAll = h, ss.created
			}
			if ss.keyID == keyID {
				n++
				if tKey.IsZero() || ss.created.Before(tKey) {
					oldestKey, tKey = h, ss.created
				}
			}
		}
		switch {
		case n >= maxContentSessionsPerKey:
			delete(cs.byID, oldestKey)
		case len(cs.byID) >= maxContentSessions:
			delete(cs.byID, oldestAll)
		default:
			return
		}
	}
}

func (cs *contentSessions) expired(ss *contentSession, now time.Time) bool {
	return now.Sub(ss.seen) >= contentSessionIdle || now.Sub(ss.created) >= contentSessionMax
}

// lookup returns the key of the live session id if it is bound to host
// and t (touching it).
func (cs *contentSessions) lookup(id, host string, t contentTarget) (string, bool) {
	h := sha256.Sum256([]byte(id))
	now := cs.now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ss, ok := cs.byID[h]
	if !ok {
		return "", false
	}
	if cs.expired(ss, now) {
		delete(cs.byID, h)
		return "", false
	}
	if ss.host != host || ss.target != t {
		return "", false
	}
	ss.seen = now
	return ss.keyID, true
}

// endKey drops every session of keyID (its key was revoked).
func (cs *contentSessions) endKey(keyID string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for h, ss := range cs.byID {
		if ss.keyID == keyID {
			delete(cs.byID, h)
		}
	}
}

// count is the number of sessions held (tests).
func (cs *contentSessions) count() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.byID)
}

func contentCookieName(r *http.Request) string {
	if r.TLS != nil {
		return contentCookieSecure
	}
	return contentCookie
}

// hasKeyHeader reports whether r carries a key in a header.
func hasKeyHeader(r *http.Request) bool {
	for _, h := range []string{"Authorization", "X-API-Key", "X-AIO-API-Key"} {
		if _, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			return true
		}
	}
	return false
}

var (
	errContentCrossSite = fault.New(fault.Forbidden, "the preview's session is refused on a request from another origin")
	errContentEnded     = fault.New(fault.Unauthorized, "the preview's session has ended; open the preview again with a preview ticket")
)

// serveContentSession authenticates a request on a preview host by its
// content session, or starts one for a browser's navigation that brings a
// preview ticket. It reports false when r carries neither (the key or
// ticket path decides).
func (s *Server) serveContentSession(w http.ResponseWriter, r *http.Request, next http.Handler, t contentTarget, pattern string) bool {
	host := strings.ToLower(r.Host)
	hasTicket := r.URL.Query().Has(auth.TicketParam)
	if hasKeyHeader(r) {
		return false
	}
	if hasTicket {
		if r.Method != http.MethodGet || r.Header.Get("Sec-Fetch-Mode") != "navigate" {
			return false // one request, as anywhere
		}
		// The page is answered at once (no redirect: a redirect chain
		// that began on another site is cross-site to the browser, and
		// the next request would be refused); its resources come with
		// the cookie.
		s.authenticate(w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := MustCaller(r.Context())
			var id string
			if err == nil {
				id, err = s.sessions.create(c.KeyID, host, t)
			}
			if err != nil {
				WriteError(w, r, fault.Wrap(fault.Internal, err, "could not start the preview's session"))
				return
			}
			http.SetCookie(w, &http.Cookie{ // #nosec G124 -- Secure is dropped only on plain HTTP, where a browser would refuse the cookie; HttpOnly and SameSite=Strict always
				Name: contentCookieName(r), Value: id, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int(contentSessionMax.Seconds())})
			s.auditContentSession(r.Context(), c, t)
			next.ServeHTTP(w, r)
		}), pattern)
		return true
	}
	var ids []string
	for _, ck := range r.Cookies() {
		if ck.Name == contentCookieName(r) && len(ids) < maxContentCookies {
			ids = append(ids, ck.Value)
		}
	}
	if len(ids) == 0 {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default: // same-site (another sandbox's host) or cross-site
		WriteError(w, r, errContentCrossSite)
		return true
	}
	keyID := ""
	for _, id := range ids {
		if k, ok := s.sessions.lookup(id, host, t); ok {
			keyID = k
			break
		}
	}
	if keyID == "" {
		WriteError(w, r, errContentEnded)
		return true
	}
	c, err := s.auth.SessionCaller(r.Context(), keyID, auth.ClientIP(r.RemoteAddr))
	if err != nil {
		if fault.KindOf(err) == fault.Unauthorized {
			s.sessions.endKey(keyID)
		}
		WriteError(w, r, err)
		return true
	}
	if cc, ok := r.Context().Value(callerCarrierKey{}).(*callerCarrier); ok {
		cc.c = &c
	}
	if err := s.authorizeRoute(r.Context(), c, r.Method, pattern); err != nil {
		WriteError(w, r, err)
		return true
	}
	next.ServeHTTP(w, r.WithContext(auth.WithCaller(r.Context(), c)))
	return true
}

// auditContentSession records the start of a preview's session.
func (s *Server) auditContentSession(ctx context.Context, c auth.Caller, t contentTarget) {
	if _, err := s.audit.Append(context.WithoutCancel(ctx), audit.Entry{Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
		Action: "content.session", Target: fmt.Sprintf("port %d", t.port), Sandbox: t.id, Verdict: audit.Allow}); err != nil {
		LoggerFrom(ctx).Error("audit append failed", "action", "content.session", "err", err)
	}
}
