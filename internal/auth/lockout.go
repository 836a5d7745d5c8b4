package auth

import (
	"net"
	"sync"
	"time"
)

// Failed-auth lockout defaults (SECURITY-RULES.md).
const (
	DefaultLockoutLimit  = 10
	DefaultLockoutWindow = 60 * time.Second
	// maxTrackedAddrs bounds the lockout table; an attacker spraying source
	// addresses evicts the oldest entries rather than growing memory.
	maxTrackedAddrs = 10000
	// lockedProbeInterval is how often a locked address may still have a
	// guessable credential checked when the request is Local (the operator
	// at the console): one check per interval, so the operator gets in on a
	// retry while a local guesser is held to one guess per interval against
	// a key of at least 32 characters.
	lockedProbeInterval = 2 * time.Second
)

// lockout counts failed attempts per client address in a fixed window that
// starts at the first failure. At limit failures the address is locked for
// one full window from that moment; while locked, requests are refused and
// NOT counted, so a client that stops retrying is let back in when the lock
// ends (and a client that keeps hammering does not extend it).
type lockout struct {
	limit  int
	window time.Duration

	mu    sync.Mutex
	addrs map[string]*attempts
}

type attempts struct {
	start       time.Time // first failure of the current window
	count       int
	lockedUntil time.Time // zero when not locked
	lastProbe   time.Time // last check allowed while locked (probe)
}

func newLockout(limit int, window time.Duration) *lockout {
	return &lockout{limit: limit, window: window, addrs: map[string]*attempts{}}
}

// lockoutKey is the unit the lockout counts: the IPv4 address, or the /64
// of an IPv6 address (one host usually owns a whole /64, so counting single
// IPv6 addresses would let it rotate through them, and would let it flood
// the bounded table to evict its own lock).
func lockoutKey(addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() != nil {
		return addr
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// check returns how long addr remains locked (0 = not locked).
func (l *lockout) check(addr string, now time.Time) time.Duration {
	addr = lockoutKey(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[addr]
	if a == nil {
		return 0
	}
	if !a.lockedUntil.IsZero() {
		if now.Before(a.lockedUntil) {
			return a.lockedUntil.Sub(now)
		}
		delete(l.addrs, addr) // lock over: a clean slate
	}
	return 0
}

// probe reports whether a request from the locked addr may have its
// credential checked now: at most once per lockedProbeInterval. It is only
// asked for Local requests with a guessable credential.
func (l *lockout) probe(addr string, now time.Time) bool {
	addr = lockoutKey(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[addr]
	if a == nil || a.lockedUntil.IsZero() || !now.Before(a.lockedUntil) {
		return true // not locked
	}
	if !a.lastProbe.IsZero() && now.Sub(a.lastProbe) < lockedProbeInterval {
		return false
	}
	a.lastProbe = now
	return true
}

// fail records a failure; it returns true when this failure locked addr.
func (l *lockout) fail(addr string, now time.Time) bool {
	addr = lockoutKey(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[addr]
	if a != nil && a.lockedUntil.IsZero() && now.Sub(a.start) >= l.window {
		a = nil // window over
	}
	if a != nil && !a.lockedUntil.IsZero() {
		if now.Before(a.lockedUntil) {
			return false // already locked: refused requests are not counted
		}
		a = nil
	}
	if a == nil {
		l.makeRoom(now)
		a = &attempts{start: now}
		l.addrs[addr] = a
	}
	a.count++
	if a.count >= l.limit {
		a.lockedUntil = now.Add(l.window)
		return true
	}
	return false
}

// makeRoom keeps the table under maxTrackedAddrs. Caller holds mu.
func (l *lockout) makeRoom(now time.Time) {
	if len(l.addrs) < maxTrackedAddrs {
		return
	}
	var oldestAddr string
	var oldest time.Time
	for addr, a := range l.addrs {
		expired := (a.lockedUntil.IsZero() && now.Sub(a.start) >= l.window) ||
			(!a.lockedUntil.IsZero() && !now.Before(a.lockedUntil))
		if expired {
			delete(l.addrs, addr)
			continue
		}
		if oldestAddr == "" || a.start.Before(oldest) {
			oldestAddr, oldest = addr, a.start
		}
	}
	if len(l.addrs) >= maxTrackedAddrs && oldestAddr != "" {
		delete(l.addrs, oldestAddr)
	}
}

// size is for tests.
func (l *lockout) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}
