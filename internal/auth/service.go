package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/store"
)

// successAuditInterval: a key's successful authentication from one address
// is audited at most once per interval, so the audit log records who came in
// without one record per request (each tool call is audited on its own).
const successAuditInterval = 10 * time.Minute

// maxSuccessSeen bounds the success-dedup table.
const maxSuccessSeen = 10000

// Service authenticates and authorizes requests and manages keys.
type Service struct {
	st     store.Store
	audit  audit.Appender
	log    *slog.Logger
	now    func() time.Time
	lock   *lockout
	ticket *tickets
	// maxima are the server's rate limits: a key's own limits may not be
	// above them (CreateKeyWithLimits).
	maxima ratelimit.Rules
	// keys caches the Callers of keys that authenticated (keycache.go);
	// nil without WithKeyCache: every request reads the key's row.
	keys *keyCache
	// keyCachePath is WithKeyCache's path, opened by NewService.
	keyCachePath string

	mu          sync.Mutex
	onRevoke    []func(keyID string)
	successSeen map[string]time.Time // keyID+"|"+addr → last audited success
}

// Option configures a Service.
type Option func(*Service)

// WithClock replaces time.Now; tests use it to move through lockout windows
// and ticket expiry without sleeping.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithLockout overrides the failed-auth limit and window.
func WithLockout(limit int, window time.Duration) Option {
	return func(s *Service) { s.lock = newLockout(limit, window) }
}

// WithRateMaxima sets the server's configured rate limits, the ceiling of
// a key's own limits (default: ratelimit.DefaultRules()).
func WithRateMaxima(r ratelimit.Rules) Option { return func(s *Service) { s.maxima = r } }

// WithKeyCache caches the Callers of keys that authenticated, kept honest
// by the epoch file at path (keycache.go): every process that revokes or
// changes a key over the same store must use the same path, so that the
// next request after a revocation is refused. Only for a store no other
// server shares (the embedded SQLite); the CLI passes it too, so that its
// revocations reach a running server at once. If the file cannot be
// opened, the Service runs without the cache.
func WithKeyCache(path string) Option { return func(s *Service) { s.keyCachePath = path } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// NewService returns the auth service over st, auditing to a.
func NewService(st store.Store, a audit.Appender, opts ...Option) *Service {
	s := &Service{
		st: st, audit: a, log: slog.Default(), now: time.Now,
		lock:        newLockout(DefaultLockoutLimit, DefaultLockoutWindow),
		ticket:      newTickets(),
		successSeen: map[string]time.Time{},
		maxima:      ratelimit.DefaultRules(),
	}
	for _, o := range opts {
		o(s)
	}
	if sh, ok := st.(SharedTickets); ok { // a cluster: tickets work through every node
		s.ticket.shared = sh
	}
	if s.keyCachePath != "" {
		kc, err := openKeyCache(s.keyCachePath)
		if err != nil {
			s.log.Error("auth: the key cache is off; every request reads its key from the store", "err", err)
		} else {
			s.keys = kc
		}
	}
	return s
}

// Close releases the key cache's file. The Service still works after it,
// reading every key from the store.
func (s *Service) Close() error {
	if s.keys != nil {
		s.keys.close()
	}
	return nil
}

// keyChanged is called after a key was changed in the store (revoked, the
// admin key re-hashed): other processes' caches learn it from the epoch
// file, this one drops its entries. If the epoch cannot be written this
// process stops caching (another one may not learn of the change until its
// revocation poll; the error says so).
func (s *Service) keyChanged() {
	if s.keys == nil {
		return
	}
	if err := s.keys.bump(); err != nil {
		s.keys.close()
		s.log.Error("auth: could not signal a key change to other processes; a running server sees it at its next revocation poll", "err", err)
		return
	}
	s.keys.forget()
}

// OnRevoke registers fn to run (synchronously, after the revocation is
// stored) whenever a key is revoked, so WebSocket/MCP sessions of that key
// can be closed. fn must not block.
func (s *Service) OnRevoke(fn func(keyID string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRevoke = append(s.onRevoke, fn)
}

// Locked returns how long addr is still locked out (0 = not locked). The
// HTTP layer answers 429 to a locked client whose request carries no usable
// credential; Authenticate decides for the rest.
func (s *Service) Locked(addr string) time.Duration {
	return s.lock.check(addr, s.now())
}

// Authenticate resolves a credential presented from addr. Failures are
// Unauthorized (or RateLimited when the address is locked out) and are
// counted and audited; a missing credential should not reach here.
func (s *Service) Authenticate(ctx context.Context, addr string, cred Credential) (Caller, error) {
	now := s.now()
	locked := s.lock.check(addr, now)
	if locked > 0 && !s.checkWhileLocked(addr, cred, now) {
		return Caller{}, lockedErr(locked)
	}
	var (
		c      Caller
		reason string
		actor  string
	)
	switch {
	case cred.Ticket != "":
		c, reason = s.redeemTicket(ctx, cred.Ticket, cred.Scopes, now)
	case cred.Key != "":
		c, actor, reason = s.checkKey(ctx, cred.Key)
	default:
		return Caller{}, errMissing
	}
	if reason == "store" {
		return Caller{}, fault.New(fault.Unavailable, "authentication is temporarily unavailable")
	}
	if reason != "" {
		if locked > 0 {
			// Checked despite the lock and wrong: the same 429 as an
			// unchecked request, neither counted (the lock already runs)
			// nor audited (a hammering client would flood the log).
			return Caller{}, lockedErr(locked)
		}
		err := s.failed(ctx, addr, actor, reason, now)
		if cred.Ticket != "" && fault.KindOf(err) == fault.Unauthorized {
			err = ticketRefusal(cred.Scopes)
		}
		return Caller{}, err
	}
	c.Addr = addr
	s.auditSuccess(ctx, c, now)
	return c, nil
}

// checkWhileLocked decides whether a credential from a locked-out address
// is still checked. The lockout exists to stop guessing; it must not let a
// burst of bad keys (one buggy local agent) deny service to holders of
// valid keys. So:
//   - a generated key or ticket (32 random bytes) is always checked: no
//     lockout makes guessing it any harder, and refusing it only denies
//     service;
//   - any other credential (an operator-chosen SANDBOX_API_KEY, at least 32
//     characters) is refused while locked, except for a Local request (a
//     loopback peer with no forwarding header: the operator's own console),
//     which is checked at most once per lockedProbeInterval: slowed, not
//     refused.
func (s *Service) checkWhileLocked(addr string, cred Credential, now time.Time) bool {
	if cred.highEntropy() {
		return true
	}
	return cred.Local && s.lock.probe(addr, now)
}

// RecordFailure counts and audits an authentication failure that the HTTP
// layer detected itself (malformed header, key in the query string).
func (s *Service) RecordFailure(ctx context.Context, addr, reason string) error {
	return s.failed(ctx, addr, "", reason, s.now())
}

func (s *Service) failed(ctx context.Context, addr, actor, reason string, now time.Time) error {
	locked := s.lock.fail(addr, now)
	s.appendAudit(ctx, audit.Entry{Actor: actor, ClientAddr: addr, Action: "auth.failure", Verdict: audit.Deny,
		Detail: map[string]any{"reason": reason}})
	if locked {
		s.log.Warn("auth lockout", "client_addr", addr, "window", s.lock.window.String())
		s.appendAudit(ctx, audit.Entry{ClientAddr: addr, Action: "auth.lockout", Verdict: audit.Deny,
			Detail: map[string]any{"failures": s.lock.limit, "window_seconds": int(s.lock.window / time.Second)}})
		return lockedErr(s.lock.window)
	}
	return fault.New(fault.Unauthorized, "invalid API key")
}

// ticketRefusal is the 401 for a ticket that did not authenticate: the
// route's scopes say which tickets it would have taken.
func ticketRefusal(scopes []TicketScope) error {
	if len(scopes) == 0 {
		return fault.New(fault.Unauthorized, "this route does not take tickets (a ticket opens only the routes of its scope); send the key in a header")
	}
	names := make([]string, len(scopes))
	for i, sc := range scopes {
		names[i] = string(sc)
	}
	return fault.Errorf(fault.Unauthorized, "invalid, used or expired ticket (this route takes a ticket of scope %s)", strings.Join(names, " or "))
}

func lockedErr(d time.Duration) error {
	return fault.WithRetryAfter(fault.RateLimited, ticks(d), "too many failed authentication attempts; retry later")
}

// checkKey looks the key up by hash. reason is "" on success.
func (s *Service) checkKey(ctx context.Context, key string) (c Caller, actor, reason string) {
	sum := keySum(key)
	var (
		epoch     uint64
		cacheable bool
	)
	if s.keys != nil {
		var hit bool
		if c, hit, epoch, cacheable = s.keys.get(sum); hit {
			return c, "", ""
		}
	}
	h := sum[:]
	k, err := s.st.KeyByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return Caller{}, "", "unknown key"
	}
	if err != nil {
		s.log.Error("auth: key lookup", "err", err)
		return Caller{}, "", "store"
	}
	// The index lookup found the row; the full-length comparison is
	// constant-time so no timing difference depends on the stored hash.
	if subtle.ConstantTimeCompare(k.Hash, h) != 1 {
		return Caller{}, "", "unknown key"
	}
	if k.Revoked() {
		return Caller{}, k.ID, "revoked key"
	}
	role, err := ParseRole(k.Role)
	if err != nil {
		return Caller{}, k.ID, "bad role"
	}
	limits, err := keyLimits(k)
	if err != nil {
		s.log.Error("auth: a stored key's rate limits do not parse; the key is refused", "key", k.ID, "err", err)
		return Caller{}, k.ID, "bad rate limits"
	}
	c = Caller{KeyID: k.ID, KeyName: k.Name, Role: role, RateLimits: limits}
	if cacheable {
		s.keys.put(sum, c, epoch)
	}
	return c, "", ""
}

// KeyRateLimits reads a stored key's own rate limits, for a Caller built
// from a key row outside Authenticate (the console's sessions). An error
// must refuse the key: it must not run without its limits.
func KeyRateLimits(k store.Key) (ratelimit.Rules, error) { return keyLimits(k) }

// keyLimits reads a stored key's own rate limits. A row that does not
// parse refuses the key (fail closed: it must not run unlimited).
func keyLimits(k store.Key) (ratelimit.Rules, error) {
	if k.RateLimits == "" {
		return nil, nil
	}
	return ratelimit.ParseKeyRules(k.RateLimits)
}

func (s *Service) auditSuccess(ctx context.Context, c Caller, now time.Time) {
	id := c.KeyID + "|" + c.Addr
	s.mu.Lock()
	last, seen := s.successSeen[id]
	fresh := !seen || now.Sub(last) >= successAuditInterval
	if fresh {
		if len(s.successSeen) >= maxSuccessSeen {
			for k, t := range s.successSeen {
				if now.Sub(t) >= successAuditInterval {
					delete(s.successSeen, k)
				}
			}
			if len(s.successSeen) >= maxSuccessSeen {
				clear(s.successSeen)
			}
		}
		s.successSeen[id] = now
	}
	s.mu.Unlock()
	if fresh {
		s.appendAudit(ctx, audit.Entry{Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
			Action: "auth.success", Verdict: audit.Allow, Detail: map[string]any{"ticket": c.ViaTicket, "scope": string(c.TicketScope)}})
	}
}

// appendAudit writes a record; a failure is logged, not returned: losing an
// audit write must not turn a refusal into a success or vice versa.
func (s *Service) appendAudit(ctx context.Context, e audit.Entry) {
	if s.audit == nil {
		return
	}
	if _, err := s.audit.Append(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("audit append failed", "action", e.Action, "err", err)
	}
}

// Require returns nil when c has one of roles; otherwise it audits the
// refusal as authz.deny for action and returns a Forbidden fault.
func (s *Service) Require(ctx context.Context, c Caller, action string, roles ...Role) error {
	if slices.Contains(roles, c.Role) {
		return nil
	}
	s.appendAudit(ctx, audit.Entry{Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
		Action: "authz.deny", Target: action, Verdict: audit.Deny,
		Detail: map[string]any{"need": roles}})
	return fault.Errorf(fault.Forbidden, "the %s role may not %s", c.Role, action)
}

// IssueTicket mints a one-time ticket of scope for c, valid for
// TicketTTL. A caller that came with a ticket gets none: one leaked
// ticket must not chain into the next.
func (s *Service) IssueTicket(ctx context.Context, c Caller, scope TicketScope) (string, time.Time, error) {
	if _, err := ParseTicketScope(string(scope)); err != nil {
		return "", time.Time{}, fault.InvalidField("scope", err.Error())
	}
	if c.ViaTicket {
		s.appendAudit(ctx, audit.Entry{Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
			Action: "ticket.create", Target: string(scope), Verdict: audit.Deny, Detail: map[string]any{"reason": "ticket"}})
		return "", time.Time{}, fault.New(fault.Forbidden, "a ticket does not mint tickets; use the key or the console session")
	}
	if scope == ScopeConsole && c.ViaSession {
		// A console ticket signs a browser in for up to a session's
		// lifetime; a session minting them would renew itself forever.
		s.appendAudit(ctx, audit.Entry{Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
			Action: "ticket.create", Target: string(scope), Verdict: audit.Deny, Detail: map[string]any{"reason": "session"}})
		return "", time.Time{}, fault.New(fault.Forbidden, "console tickets are minted with the key, not by a console session")
	}
	t, err := newSecret(TicketPrefix)
	if err != nil {
		return "", time.Time{}, fault.Wrap(fault.Internal, err, "could not create a ticket")
	}
	now := s.now()
	exp := now.Add(TicketTTL)
	added, err := s.ticket.add(ctx, scope, t, c.KeyID, exp, now)
	if err != nil {
		s.log.Error("auth: store a ticket", "err", err)
		return "", time.Time{}, fault.New(fault.Unavailable, "could not create a ticket")
	}
	if !added {
		return "", time.Time{}, fault.WithRetryAfter(fault.RateLimited, ticks(TicketTTL), "too many outstanding tickets")
	}
	s.appendAudit(ctx, audit.Entry{Actor: c.KeyID, Role: string(c.Role), ClientAddr: c.Addr,
		Action: "ticket.create", Target: string(scope), Verdict: audit.Allow})
	return t, exp, nil
}

// redeemTicket consumes a ticket of one of scopes (the route's) and
// re-reads its key (it may have been revoked since the ticket was issued).
func (s *Service) redeemTicket(ctx context.Context, t string, scopes []TicketScope, now time.Time) (Caller, string) {
	if len(scopes) == 0 {
		return Caller{}, "ticket on a route that takes none"
	}
	var (
		keyID string
		scope TicketScope
	)
	for _, sc := range scopes {
		id, ok, err := s.ticket.take(ctx, sc, t, now)
		if err != nil {
			s.log.Error("auth: take a ticket", "err", err)
			return Caller{}, "store"
		}
		if ok {
			keyID, scope = id, sc
			break
		}
	}
	if keyID == "" {
		return Caller{}, "unknown or expired ticket, or one of another scope"
	}
	k, err := s.st.KeyByID(ctx, keyID)
	if errors.Is(err, store.ErrNotFound) {
		return Caller{}, "ticket of deleted key"
	}
	if err != nil {
		s.log.Error("auth: ticket key lookup", "err", err)
		return Caller{}, "store"
	}
	if k.Revoked() {
		return Caller{}, "ticket of revoked key"
	}
	role, err := ParseRole(k.Role)
	if err != nil {
		return Caller{}, "bad role"
	}
	limits, err := keyLimits(k)
	if err != nil {
		s.log.Error("auth: a stored key's rate limits do not parse; the key is refused", "key", k.ID, "err", err)
		return Caller{}, "bad rate limits"
	}
	return Caller{KeyID: k.ID, KeyName: k.Name, Role: role, ViaTicket: true, TicketScope: scope, RateLimits: limits}, ""
}

// ErrSessionEnded is a session's key that is gone: revoked, deleted or
// unreadable; the holder of the session signs in again.
var ErrSessionEnded = fault.New(fault.Unauthorized, "the session has ended (its key was revoked); open it again")

// SessionCaller re-reads the key a server-side session (the content
// origin's) was started for: the session is refused the moment its key is
// revoked, on any node.
func (s *Service) SessionCaller(ctx context.Context, keyID, addr string) (Caller, error) {
	k, err := s.st.KeyByID(ctx, keyID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && k.Revoked()) {
		return Caller{}, ErrSessionEnded
	}
	if err != nil {
		return Caller{}, fault.Wrap(fault.Unavailable, err, "authentication is temporarily unavailable")
	}
	role, err := ParseRole(k.Role)
	if err != nil {
		return Caller{}, ErrSessionEnded
	}
	limits, err := keyLimits(k)
	if err != nil {
		return Caller{}, ErrSessionEnded
	}
	return Caller{KeyID: k.ID, KeyName: k.Name, Role: role, Addr: addr, RateLimits: limits, ViaSession: true}, nil
}

// KeyInfo is a key as shown to operators: never the secret or its hash.
type KeyInfo struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Role      Role       `json:"role"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// RateLimits are the key's own limits (SANDBOX_RATE_LIMITS syntax);
	// absent when the key has the server's.
	RateLimits string `json:"rate_limits,omitempty" doc:"the key's own rate limits, e.g. command=2/m:2; absent: the server's"`
}

func infoOf(k store.Key) KeyInfo {
	ki := KeyInfo{ID: k.ID, Name: k.Name, Role: Role(k.Role), CreatedAt: k.CreatedAt, RateLimits: k.RateLimits}
	if k.Revoked() {
		t := k.RevokedAt
		ki.RevokedAt = &t
	}
	return ki
}

// maxKeyNameLen bounds key names (they show up in lists and logs).
const maxKeyNameLen = 64

// CreateKey creates a key and returns it with its secret, which is never
// retrievable again. by is who asked (audited as the actor).
func (s *Service) CreateKey(ctx context.Context, by Caller, name string, role Role) (KeyInfo, string, error) {
	return s.CreateKeyWithLimits(ctx, by, name, role, "")
}

// CreateKeyWithLimits is CreateKey for a key with its own rate limits,
// limits in the syntax of SANDBOX_RATE_LIMITS ("command=2/m,code=5/m"):
// only file, code, command, browser, read and manage, each at or below the server's
// limit of that category (WithRateMaxima) — an admin may hold a key
// tighter than the server, not looser. Only admins reach this (keys.create
// is an admin tool; the CLI is the operator).
func (s *Service) CreateKeyWithLimits(ctx context.Context, by Caller, name string, role Role, limits string) (KeyInfo, string, error) {
	var stored string
	if limits != "" {
		// keys.create is an admin tool already; this holds for any other
		// caller of the Service too.
		if by.Role != RoleAdmin {
			return KeyInfo{}, "", fault.New(fault.Forbidden, "only an admin sets a key's rate limits")
		}
		r, err := ratelimit.ParseKeyRules(limits)
		if err == nil {
			err = r.Within(s.maxima)
		}
		if err != nil {
			// 422: well-formed JSON whose value the server will not take.
			return KeyInfo{}, "", &fault.Error{Kind: fault.Unprocessable, Field: "body.rate_limits", Msg: "rate_limits: " + err.Error()}
		}
		stored = r.String()
	}
	if name == "" || len(name) > maxKeyNameLen || !validName(name) {
		return KeyInfo{}, "", fault.InvalidField("body.name", fmt.Sprintf("name must be 1-%d characters of letters, digits, space, dot, dash or underscore", maxKeyNameLen))
	}
	if _, err := ParseRole(string(role)); err != nil {
		return KeyInfo{}, "", fault.InvalidField("body.role", "role must be admin, agent or viewer")
	}
	secret, err := GenerateKey()
	if err != nil {
		return KeyInfo{}, "", fault.Wrap(fault.Internal, err, "could not create a key")
	}
	id, err := newKeyID()
	if err != nil {
		return KeyInfo{}, "", fault.Wrap(fault.Internal, err, "could not create a key")
	}
	k := store.Key{ID: id, Name: name, Role: string(role), Hash: HashKey(secret), CreatedAt: s.now().UTC(), RateLimits: stored}
	if err := s.st.CreateKey(ctx, k); err != nil {
		return KeyInfo{}, "", fault.Wrap(fault.Internal, err, "could not store the key")
	}
	s.appendAudit(ctx, audit.Entry{Actor: by.KeyID, Role: string(by.Role), ClientAddr: by.Addr,
		Action: "key.create", Target: id, Verdict: audit.Allow, Detail: map[string]any{"name": name, "role": string(role), "rate_limits": stored}})
	return infoOf(k), secret, nil
}

func validName(s string) bool {
	for _, r := range s {
		ok := r == ' ' || r == '.' || r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// ListKeys returns every key without secrets.
func (s *Service) ListKeys(ctx context.Context) ([]KeyInfo, error) {
	ks, err := s.st.ListKeys(ctx)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "could not list keys")
	}
	out := make([]KeyInfo, 0, len(ks))
	for _, k := range ks {
		out = append(out, infoOf(k))
	}
	return out, nil
}

// RevokeKey revokes id; the next request with it is refused and the
// OnRevoke hooks run. The bootstrap admin key cannot be revoked here (it is
// managed through SANDBOX_API_KEY or its key file).
func (s *Service) RevokeKey(ctx context.Context, by Caller, id string) (KeyInfo, error) {
	if id == AdminKeyID {
		return KeyInfo{}, fault.New(fault.Conflict, "the bootstrap admin key is managed by SANDBOX_API_KEY or its key file, not revoked through the API")
	}
	k, err := s.st.RevokeKey(ctx, id, s.now().UTC())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		// The write may have happened: no cache may keep the key.
		s.keyChanged()
	}
	if errors.Is(err, store.ErrNotFound) {
		return KeyInfo{}, fault.New(fault.NotFound, "no such key")
	}
	if err != nil {
		return KeyInfo{}, fault.Wrap(fault.Internal, err, "could not revoke the key")
	}
	s.keyChanged()
	if err := s.ticket.dropKey(ctx, id); err != nil {
		// The key is revoked: a ticket of it left behind is refused when
		// redeemed (redeemTicket re-reads the key) and expires in TicketTTL.
		s.log.Error("auth: drop a revoked key's tickets", "key", id, "err", err)
	}
	s.appendAudit(ctx, audit.Entry{Actor: by.KeyID, Role: string(by.Role), ClientAddr: by.Addr,
		Action: "key.revoke", Target: id, Verdict: audit.Allow, Detail: map[string]any{"name": k.Name}})
	s.fireRevoke(id)
	return infoOf(k), nil
}

func (s *Service) fireRevoke(id string) {
	s.mu.Lock()
	hooks := slices.Clone(s.onRevoke)
	s.mu.Unlock()
	for _, fn := range hooks {
		fn(id)
	}
}

// EnsureAdmin makes the bootstrap admin key (id AdminKeyID) match key:
// created on first start, re-hashed when the operator changed it.
func (s *Service) EnsureAdmin(ctx context.Context, key string) error {
	if !validCredential(key) {
		return errors.New("admin key must be printable ASCII without spaces")
	}
	h := HashKey(key)
	k, err := s.st.KeyByID(ctx, AdminKeyID)
	if err == nil && subtle.ConstantTimeCompare(k.Hash, h) == 1 && !k.Revoked() {
		return nil
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read admin key: %w", err)
	}
	created := s.now().UTC()
	if err == nil {
		created = k.CreatedAt
	}
	err = s.st.PutKey(ctx, store.Key{ID: AdminKeyID, Name: "admin", Role: string(RoleAdmin), Hash: h, CreatedAt: created})
	s.keyChanged() // the previous admin key no longer authenticates
	if err != nil {
		return fmt.Errorf("store admin key: %w", err)
	}
	s.appendAudit(ctx, audit.Entry{Actor: "system", Action: "key.admin_set", Target: AdminKeyID, Verdict: audit.Allow})
	return nil
}

// WatchRevocations polls the store every interval and runs the OnRevoke
// hooks for keys revoked by another process (`sandhold keys revoke` while
// the server runs). It returns when ctx ends.
func (s *Service) WatchRevocations(ctx context.Context, interval time.Duration) {
	known := map[string]bool{}
	first := true
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if s.keys != nil && s.keys.replaced() {
			// Someone replaced or removed the epoch file: writers now
			// signal through another file than the one this cache reads.
			if err := s.keys.reopen(); err != nil {
				s.keys.close()
				s.log.Error("auth: the key cache is off; every request reads its key from the store", "err", err)
			}
		}
		ks, err := s.st.ListKeys(ctx)
		if err == nil {
			for _, k := range ks {
				if k.Revoked() && !known[k.ID] {
					known[k.ID] = true
					if !first {
						if s.keys != nil {
							s.keys.forget() // a revocation not signalled through the epoch file
						}
						if err := s.ticket.dropKey(ctx, k.ID); err != nil && ctx.Err() == nil {
							s.log.Error("auth: drop a revoked key's tickets", "key", k.ID, "err", err)
						}
						s.fireRevoke(k.ID)
					}
				}
			}
			if first && s.keys != nil {
				// Revocations before this first list are taken as known,
				// but a request may have cached a key before it: forget
				// every entry once, so none outlives a revocation the
				// list already held (they refill from the store).
				s.keys.forget()
			}
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
