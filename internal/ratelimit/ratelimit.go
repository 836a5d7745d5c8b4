// Package ratelimit holds the per-key token buckets and concurrency caps that
// keep one API key (or one client address, or one sandbox) from starving the
// host: a runaway agent looping on exec, a client brute-forcing keys, a key
// opening terminals without end. It knows nothing about HTTP; the caller maps
// a refused Decision to 429 with Retry-After and X-RateLimit-* headers.
//
// Two kinds of limit share one table of buckets:
//
//   - rate limits (Allow): a token bucket per (key, category) with a refill of
//     Rule.PerMinute and a capacity of Rule.Burst. A refused request takes no
//     token and does not move the bucket's clock, so a client that keeps
//     retrying while refused is let back in exactly when the bucket refills.
//   - concurrency caps (Acquire): a counter per (key, category) of holds that
//     are still open, at most Rule.Concurrent; release is idempotent.
//
// Memory stays bounded under key churn (a client cycling through addresses,
// or many keys): a bucket that has been idle long enough to refill completely
// is indistinguishable from a new one and is dropped by a periodic sweep, and
// the table never holds more than Options.MaxTracked buckets (see
// DefaultMaxTracked for what happens at the cap and why).
package ratelimit

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Category names what a limit counts. The caller picks the key: an API key id
// for File/Exec/Browser/Terminal/Sandboxes, a client address for AuthFailure,
// a sandbox id for Executions.
type Category uint8

const (
	// File counts file operations (read, write, list, upload, download).
	File Category = iota + 1
	// Exec counts code executions: /v1/code, /v1/jupyter, /v1/nodejs (its
	// configuration name is "code"; "exec" is accepted for old policies).
	Exec
	// Browser counts browser operations.
	Browser
	// AuthFailure counts failed authentication attempts per client address.
	AuthFailure
	// Terminal caps concurrent terminal (PTY/WebSocket) sessions per key.
	Terminal
	// Sandboxes caps the sandboxes one key holds at once (Acquire on create,
	// release on delete).
	Sandboxes
	// Executions caps concurrent executions inside one sandbox (the key is the
	// sandbox id).
	Executions
	// Command counts commands: exec.run, shell.* and bash.* (see ForTool).
	// Declared after the others so their numbers do not move.
	Command
	// Read counts cheap calls that change nothing: metadata, listings,
	// status polls (see categories.go for which tools).
	Read
	// Manage counts changes of configuration and lifecycle: sandboxes,
	// their network and proxy settings, hooks, observation, custom tools.
	Manage
	// Approvals caps the calls of one key that wait at once for an
	// operator's decision (X-Approval-Wait): each holds a connection and
	// a goroutine, so identical calls sharing one pending approval still
	// count one each.
	Approvals
)

// String returns the category's stable name (used in metrics labels and
// configuration).
func (c Category) String() string {
	switch c {
	case File:
		return "file"
	case Exec:
		return "code"
	case Browser:
		return "browser"
	case AuthFailure:
		return "auth_failure"
	case Terminal:
		return "terminal"
	case Sandboxes:
		return "sandboxes"
	case Executions:
		return "executions"
	case Command:
		return "command"
	case Read:
		return "read"
	case Manage:
		return "manage"
	case Approvals:
		return "approvals"
	}
	return fmt.Sprintf("category(%d)", uint8(c))
}

// Categories returns every category, in declaration order.
func Categories() []Category {
	return []Category{File, Exec, Browser, AuthFailure, Terminal, Sandboxes, Executions, Command, Read, Manage, Approvals}
}

func (c Category) valid() bool { return c >= File && c <= Approvals }

// ParseCategory maps a name from String back to its Category.
func ParseCategory(name string) (Category, error) {
	if name == legacyExecName {
		return Exec, nil
	}
	for _, c := range Categories() {
		if c.String() == name {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown rate-limit category %q", name)
}

// legacyExecName is Exec's name before commands got their own category;
// policies written then still say "exec".
const legacyExecName = "exec"

// Rule is the limit of one category.
//
// PerMinute > 0 makes Allow a token bucket refilling PerMinute tokens a
// minute with room for Burst tokens (Burst < 1 is treated as 1). Concurrent >
// 0 makes Acquire cap open holds at Concurrent. A zero field means "no limit
// of that kind": categories the caller does not limit simply have no rule.
type Rule struct {
	PerMinute float64
	Burst     int
	// Concurrent is an addition to the rate fields: the cap used by Acquire.
	Concurrent int
}

// Rules maps each limited category to its rule. A category that is absent
// is not limited.
type Rules map[Category]Rule

// Defaults from SECURITY-RULES.md (Rate limits), per key unless noted.
const (
	DefaultFilePerMinute = 100 // file operations per minute
	DefaultExecPerMinute = 10  // code executions per minute ...
	DefaultExecBurst     = 10  // ... all of which may come at once (burst-friendly)
	// DefaultCommandPerMinute: commands (exec, shell, bash) are what an
	// agent does most — ls, cat, a test run, git status — often several a
	// second while it explores. 300/min (5/s sustained) is above any agent
	// loop that waits for its model between steps, and far below a runaway
	// loop of a script (thousands a second); the guard, not the rate, is what
	// judges a command.
	DefaultCommandPerMinute = 300
	// DefaultCommandBurst lets a batch of 60 quick commands pass at once.
	DefaultCommandBurst     = 60
	DefaultBrowserPerMinute = 20 // browser operations per minute
	// DefaultReadPerMinute: reads are what an agent polls (an execution's
	// output, a shell's view) and what the console refreshes; 10/s
	// sustained with a burst of 120 is above any polling loop that sleeps
	// between polls, and bounds what a key can add to the audit by
	// looping on them (every call is a record).
	DefaultReadPerMinute = 600
	DefaultReadBurst     = 120
	// DefaultManagePerMinute: creating, deleting and reconfiguring
	// sandboxes, hooks, proxies and tools is an agent's setup, not its
	// loop: one a second sustained, 30 at once.
	DefaultManagePerMinute = 60
	DefaultManageBurst     = 30
	DefaultAuthFailures    = 10 // failed auth attempts per minute per client address
	DefaultTerminals       = 5  // concurrent terminal sessions
	// DefaultApprovalWaits: calls of one key waiting at once for an
	// operator (as many as it may have pending approvals): beyond it a
	// call is answered "pending" at once instead of holding its
	// connection open.
	DefaultApprovalWaits = 20
	// DefaultSandboxesPerKey and DefaultExecutionsPerSandbox are not in the
	// seed's table; the caller is expected to set them from its configuration.
	// These values only keep a forgotten setting from meaning "unlimited".
	DefaultSandboxesPerKey      = 10
	DefaultExecutionsPerSandbox = 16
)

// DefaultRules returns a fresh copy of the default rules.
func DefaultRules() Rules {
	return Rules{
		File:        {PerMinute: DefaultFilePerMinute, Burst: DefaultFilePerMinute},
		Exec:        {PerMinute: DefaultExecPerMinute, Burst: DefaultExecBurst},
		Command:     {PerMinute: DefaultCommandPerMinute, Burst: DefaultCommandBurst},
		Browser:     {PerMinute: DefaultBrowserPerMinute, Burst: DefaultBrowserPerMinute},
		Read:        {PerMinute: DefaultReadPerMinute, Burst: DefaultReadBurst},
		Manage:      {PerMinute: DefaultManagePerMinute, Burst: DefaultManageBurst},
		AuthFailure: {PerMinute: DefaultAuthFailures, Burst: DefaultAuthFailures},
		Terminal:    {Concurrent: DefaultTerminals},
		Approvals:   {Concurrent: DefaultApprovalWaits},
		Sandboxes:   {Concurrent: DefaultSandboxesPerKey},
		Executions:  {Concurrent: DefaultExecutionsPerSandbox},
	}
}

// maxPerMinute bounds a configured rate: above it a bucket is effectively
// unlimited and float arithmetic on refill times loses meaning.
const maxPerMinute = 1e9

// Validate checks every rule: known category, finite non-negative numbers.
func (r Rules) Validate() error {
	var errs []error
	for c, rule := range r {
		if !c.valid() {
			errs = append(errs, fmt.Errorf("rate-limit rule for %s: unknown category", c))
			continue
		}
		switch {
		case math.IsNaN(rule.PerMinute) || rule.PerMinute < 0 || rule.PerMinute > maxPerMinute:
			errs = append(errs, fmt.Errorf("rate-limit rule %s: per-minute %v outside [0, %g]", c, rule.PerMinute, float64(maxPerMinute)))
		case rule.Burst < 0:
			errs = append(errs, fmt.Errorf("rate-limit rule %s: negative burst %d", c, rule.Burst))
		case rule.Concurrent < 0:
			errs = append(errs, fmt.Errorf("rate-limit rule %s: negative concurrency %d", c, rule.Concurrent))
		}
	}
	return errors.Join(errs...)
}

// Merge returns a copy of r with every category present in over replaced by
// over's rule (whole-rule replacement: an override names the complete rule).
func (r Rules) Merge(over Rules) Rules {
	out := make(Rules, len(r)+len(over))
	for c, rule := range r {
		out[c] = rule
	}
	for c, rule := range over {
		out[c] = rule
	}
	return out
}

// Decision is the outcome of one Allow, Peek or Acquire: everything a 429
// needs. Limit == 0 means the category is not limited (set no headers).
type Decision struct {
	Allowed bool
	// Limit is the bucket capacity (Burst) for rate limits, or the cap for
	// concurrency limits (X-RateLimit-Limit).
	Limit int
	// Remaining is the whole number of requests (or holds) still available
	// right now, after this one (X-RateLimit-Remaining).
	Remaining int
	// Reset is when the bucket will be full again (X-RateLimit-Reset); for a
	// concurrency cap it is Now+RetryAfter when refused, Now otherwise.
	Reset time.Time
	// RetryAfter is how long until one more request would be allowed; zero
	// when allowed. For a concurrency cap nobody knows when a hold is released,
	// so a refusal carries ConcurrencyRetryAfter.
	RetryAfter time.Duration
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1
// when refused (the unit of the Retry-After header).
func (d Decision) RetryAfterSeconds() int {
	if d.Allowed {
		return 0
	}
	s := int(math.Ceil(d.RetryAfter.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

// ConcurrencyRetryAfter is the retry hint on a refused Acquire.
const ConcurrencyRetryAfter = time.Second

// DefaultMaxTracked is the hard cap on tracked buckets (one per key and
// category). Reason: keys for AuthFailure are client addresses, which an
// attacker with an IPv6 prefix mints for free, so the table must not grow
// with them. A bucket costs roughly 320 bytes (measured by the soak test), so
// the cap holds the table near 16 MiB, far above any real number of API keys
// times categories.
//
// At the cap, a new bucket replaces the least recently used bucket that has
// no open holds ("evict oldest-idle"). The trade-off, written down:
//   - Refusing new keys at the cap would let an attacker who fills the table
//     lock every new client out; we prefer to keep serving.
//   - Evicting resets a bucket that may not have refilled yet. To reset a
//     chosen bucket an attacker must push DefaultMaxTracked fresh buckets past
//     it after its last use, i.e. spend that many requests from that many
//     distinct keys — each of which already came with its own fresh budget, so
//     a reset never grants more than the key churn itself granted. A bucket in
//     active use stays near the front and is the last to go. Resetting someone
//     else's bucket only helps that someone.
//   - A bucket with open holds (a running terminal, a live sandbox) is never
//     evicted: that would silently raise a concurrency cap. If every
//     candidate within evictScanCap is held, the new key is refused (fail
//     closed) rather than growing the table.
const DefaultMaxTracked = 50_000

// evictScanCap bounds the walk for an evictable bucket at the cap. Reason:
// the walk runs under the lock on a request path; held buckets are bounded by
// the callers' concurrency caps, so a long run of held buckets at the LRU tail
// means something is wrong and refusing is the safe answer.
const evictScanCap = 1024

// maxKeyLen bounds the bytes a tracked key holds in memory. Reason: keys may
// come from clients (addresses, key ids before validation); longer keys are
// replaced by their SHA-256, which keeps distinct keys distinct.
const maxKeyLen = 128

// bucketID returns the stored identity of (key, cat). Hashed keys are
// flagged so that no short key can equal a long key's hash.
func bucketID(key string, cat Category) bucketKey {
	if len(key) <= maxKeyLen {
		return bucketKey{key: key, cat: cat}
	}
	sum := sha256.Sum256([]byte(key))
	return bucketKey{key: string(sum[:]), hashed: true, cat: cat}
}

// sweepInterval is how often (by the limiter's clock) idle, refilled buckets
// are dropped. Every default rule refills within a minute.
const sweepInterval = time.Minute

// Options configures a Limiter. The zero value is a limiter with
// DefaultRules, DefaultMaxTracked and the wall clock.
type Options struct {
	// Disabled turns every limit off (SANDBOX_RATE_LIMIT=false, read by the
	// caller): every call is allowed and nothing is tracked.
	Disabled bool
	// Rules are the base rules; nil means DefaultRules().
	Rules Rules
	// Roles are per-role overrides applied by Resolve (role name → rules).
	Roles map[string]Rules
	// MaxTracked caps tracked buckets; <= 0 means DefaultMaxTracked.
	MaxTracked int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Limiter tracks buckets per (key, category). Safe for concurrent use.
//
// Rules are resolved by the caller: Allow and Acquire use the limiter's base
// rules; AllowRule and AcquireRule take the rule to apply, which the caller
// gets from Resolve(role, keyOverrides) (key > role > base). A bucket adopts
// a changed rule on its next use, keeping its current token count.
type Limiter struct {
	disabled   bool
	rules      Rules
	roles      map[string]Rules
	maxTracked int
	now        func() time.Time

	mu sync.Mutex
	// buckets indexes every tracked bucket.
	buckets map[bucketKey]*bucket
	// head is the most recently used bucket, tail the least; the list links
	// every bucket in buckets.
	head, tail *bucket
	// lastSweep is when idle buckets were last dropped.
	lastSweep time.Time
}

type bucketKey struct {
	key    string
	hashed bool
	cat    Category
}

type bucket struct {
	id         bucketKey
	prev, next *bucket
	// rate is nil until the bucket is used by Allow with a rate rule.
	rate *rate.Limiter
	// rule is the rule the bucket was last used with.
	rule Rule
	// held counts open holds from Acquire.
	held int
	// idleAt is when the bucket becomes indistinguishable from a new one:
	// refilled to Burst and no holds.
	idleAt time.Time
}

// New returns a Limiter configured by opts. Invalid rules are not checked
// here; call Rules.Validate on configuration input.
func New(opts Options) *Limiter {
	l := &Limiter{
		disabled:   opts.Disabled,
		rules:      opts.Rules,
		roles:      opts.Roles,
		maxTracked: opts.MaxTracked,
		now:        opts.Now,
		buckets:    make(map[bucketKey]*bucket),
	}
	if l.rules == nil {
		l.rules = DefaultRules()
	}
	if l.maxTracked <= 0 {
		l.maxTracked = DefaultMaxTracked
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// Resolve returns the rules for a key of the given role: the base rules,
// overridden by the role's rules, overridden by the key's own rules.
func (l *Limiter) Resolve(role string, keyOverrides Rules) Rules {
	return l.rules.Merge(l.roles[role]).Merge(keyOverrides)
}

// Allow counts one request of cat for key under the base rules.
func (l *Limiter) Allow(key string, cat Category) Decision {
	return l.AllowRule(key, cat, l.rules[cat])
}

// AllowRule counts one request of cat for key under rule. A refused request
// takes nothing from the bucket.
func (l *Limiter) AllowRule(key string, cat Category, rule Rule) Decision {
	return l.take(key, cat, rule, true)
}

// Peek reports what Allow would decide without counting anything (for
// example: is this address locked out before its credentials are checked).
func (l *Limiter) Peek(key string, cat Category) Decision {
	return l.PeekRule(key, cat, l.rules[cat])
}

// Current reports key's bucket for cat under the rule it was last used
// with, counting nothing: the X-RateLimit-* headers of an allowed call.
// The zero Decision (no headers) when limits are off or the bucket is not
// tracked or holds no rate rule.
func (l *Limiter) Current(key string, cat Category) Decision {
	if l.disabled {
		return Decision{}
	}
	l.mu.Lock()
	var rule Rule
	if b := l.buckets[bucketID(key, cat)]; b != nil && b.rate != nil {
		rule = b.rule
	}
	l.mu.Unlock()
	if rule.PerMinute <= 0 {
		return Decision{}
	}
	return l.PeekRule(key, cat, rule)
}

// PeekRule is Peek under an explicit rule.
func (l *Limiter) PeekRule(key string, cat Category, rule Rule) Decision {
	return l.take(key, cat, rule, false)
}

func (l *Limiter) take(key string, cat Category, rule Rule, consume bool) Decision {
	if l.disabled || rule.PerMinute <= 0 {
		return Decision{Allowed: true}
	}
	perSec := rate.Limit(rule.PerMinute / 60)
	burst := max(rule.Burst, 1)

	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.maybeSweep(now)

	id := bucketID(key, cat)
	b := l.buckets[id]
	if b == nil && !consume {
		// An untracked key has a full bucket; do not create state to peek.
		return Decision{Allowed: true, Limit: burst, Remaining: burst, Reset: now}
	}
	if b == nil {
		b = l.insert(id, now)
		if b == nil {
			return refusedAtCap(now)
		}
	}
	l.touch(b)
	if b.rate == nil {
		b.rate = rate.NewLimiter(perSec, burst)
	} else if b.rule.PerMinute != rule.PerMinute || max(b.rule.Burst, 1) != burst {
		b.rate.SetLimitAt(now, perSec)
		b.rate.SetBurstAt(now, burst)
	}
	b.rule.PerMinute, b.rule.Burst = rule.PerMinute, rule.Burst

	var allowed bool
	if consume {
		allowed = b.rate.AllowN(now, 1)
	} else {
		allowed = b.rate.TokensAt(now) >= 1
	}
	tokens := b.rate.TokensAt(now)
	full := now.Add(durationFor(float64(burst)-tokens, perSec))
	if full.After(b.idleAt) {
		b.idleAt = full
	}
	d := Decision{
		Allowed:   allowed,
		Limit:     burst,
		Remaining: max(int(math.Floor(tokens)), 0),
		Reset:     full,
	}
	if !allowed {
		d.RetryAfter = durationFor(1-tokens, perSec)
	}
	return d
}

// durationFor is the time perSec takes to produce tokens (rounded up to the
// nanosecond so that waiting RetryAfter is always enough).
func durationFor(tokens float64, perSec rate.Limit) time.Duration {
	if tokens <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(tokens / float64(perSec) * float64(time.Second)))
}

// Acquire takes one hold of cat for key under the base rules.
func (l *Limiter) Acquire(key string, cat Category) (release func(), d Decision) {
	return l.AcquireRule(key, cat, l.rules[cat])
}

// AcquireRule takes one hold of cat for key, at most rule.Concurrent at once.
// When allowed, release gives the hold back; calling it more than once is
// harmless. When refused, release is a no-op and nothing is counted.
func (l *Limiter) AcquireRule(key string, cat Category, rule Rule) (release func(), d Decision) {
	if l.disabled || rule.Concurrent <= 0 {
		return func() {}, Decision{Allowed: true}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.maybeSweep(now)

	id := bucketID(key, cat)
	b := l.buckets[id]
	if b == nil {
		b = l.insert(id, now)
		if b == nil {
			return func() {}, refusedAtCap(now)
		}
	}
	l.touch(b)
	b.rule.Concurrent = rule.Concurrent
	if b.held >= rule.Concurrent {
		return func() {}, Decision{
			Limit:      rule.Concurrent,
			Remaining:  0,
			Reset:      now.Add(ConcurrencyRetryAfter),
			RetryAfter: ConcurrencyRetryAfter,
		}
	}
	b.held++
	d = Decision{Allowed: true, Limit: rule.Concurrent, Remaining: rule.Concurrent - b.held, Reset: now}
	var once sync.Once
	release = func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			// b cannot have been evicted while held, so it is still the
			// tracked bucket for id.
			b.held--
			if now := l.now(); now.After(b.idleAt) {
				b.idleAt = now
			}
		})
	}
	return release, d
}

// refusedAtCap is the answer when the table is full of held buckets.
func refusedAtCap(now time.Time) Decision {
	return Decision{Reset: now.Add(ConcurrencyRetryAfter), RetryAfter: ConcurrencyRetryAfter}
}

// Tracked returns the number of buckets currently held in memory.
func (l *Limiter) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// insert adds a new bucket for id at the front, evicting the oldest idle one
// first if the table is at its cap. It returns nil if no bucket could be
// evicted. Requires l.mu.
func (l *Limiter) insert(id bucketKey, now time.Time) *bucket {
	if len(l.buckets) >= l.maxTracked {
		victim := l.tail
		for i := 0; victim != nil && victim.held > 0; i++ {
			if i >= evictScanCap {
				return nil
			}
			victim = victim.prev
		}
		if victim == nil {
			return nil
		}
		l.remove(victim)
	}
	b := &bucket{id: id, idleAt: now}
	l.buckets[id] = b
	l.pushFront(b)
	return b
}

// maybeSweep drops every bucket that is idle and refilled, once per
// sweepInterval. Requires l.mu.
func (l *Limiter) maybeSweep(now time.Time) {
	if now.Sub(l.lastSweep) < sweepInterval && !now.Before(l.lastSweep) {
		return
	}
	l.lastSweep = now
	for b := l.tail; b != nil; {
		prev := b.prev
		if b.held == 0 && !now.Before(b.idleAt) {
			l.remove(b)
		}
		b = prev
	}
}

// touch moves b to the front (most recently used). Requires l.mu.
func (l *Limiter) touch(b *bucket) {
	if l.head == b {
		return
	}
	l.unlink(b)
	l.pushFront(b)
}

func (l *Limiter) pushFront(b *bucket) {
	b.prev, b.next = nil, l.head
	if l.head != nil {
		l.head.prev = b
	}
	l.head = b
	if l.tail == nil {
		l.tail = b
	}
}

func (l *Limiter) unlink(b *bucket) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		l.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		l.tail = b.prev
	}
	b.prev, b.next = nil, nil
}

func (l *Limiter) remove(b *bucket) {
	l.unlink(b)
	delete(l.buckets, b.id)
}

// maxRuleSpec caps the length of a SANDBOX_RATE_LIMITS value (hostile or
// mistyped input: a few categories need well under this).
const maxRuleSpec = 1024

// ParseRules reads a rule list such as SANDBOX_RATE_LIMITS:
// "code=10/m,command=300/m:60,file=100/m,browser=20/m,read=600/m:120,terminal=5".
// Each item is category=N/unit[:burst] (unit s, m or h; burst defaults to
// the per-minute count, at least 1) or, for a concurrency cap (terminal, approvals,
// sandboxes, executions), category=N. A category named twice is an error.
func ParseRules(spec string) (Rules, error) {
	if len(spec) > maxRuleSpec {
		return nil, fmt.Errorf("rate-limit rules: longer than %d bytes", maxRuleSpec)
	}
	out := Rules{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("rate-limit rule %q: want category=N/unit", item)
		}
		cat, err := ParseCategory(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		if _, dup := out[cat]; dup {
			return nil, fmt.Errorf("rate-limit rule %q: %s named twice", item, cat)
		}
		r, err := parseRule(cat, strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("rate-limit rule %q: %w", item, err)
		}
		out[cat] = r
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

func parseRule(cat Category, val string) (Rule, error) {
	if cat == Terminal || cat == Sandboxes || cat == Executions || cat == Approvals {
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 {
			return Rule{}, fmt.Errorf("%s is a concurrency cap: want a positive whole number", cat)
		}
		return Rule{Concurrent: n}, nil
	}
	rateSpec, burstSpec, hasBurst := strings.Cut(val, ":")
	num, unit, ok := strings.Cut(rateSpec, "/")
	if !ok {
		return Rule{}, fmt.Errorf("want N/s, N/m or N/h")
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) {
		return Rule{}, fmt.Errorf("want a positive count before /")
	}
	var perMinute float64
	switch unit {
	case "s":
		perMinute = n * 60
	case "m":
		perMinute = n
	case "h":
		perMinute = n / 60
	default:
		return Rule{}, fmt.Errorf("unit %q: want s, m or h", unit)
	}
	burst := int(math.Max(1, math.Min(perMinute, maxPerMinute)))
	if hasBurst {
		b, err := strconv.Atoi(burstSpec)
		if err != nil || b < 1 {
			return Rule{}, fmt.Errorf("burst %q: want a positive whole number", burstSpec)
		}
		burst = b
	}
	return Rule{PerMinute: perMinute, Burst: burst}, nil
}
