// Package sessions is the one table of long-lived sessions that a key
// holds in a sandbox — shell and bash sessions, stateful code interpreters
// — with what every such table needs and each used to write for itself:
// an owner per session, a per-key and a per-sandbox cap (at a cap the
// least recently used idle session is closed first; when every one is
// busy the caller gets a clear refusal), idle reaping with a timeout per
// session (short for the sessions AIO clients create implicitly), and one
// call that ends everything a revoked key holds.
//
// What it stops: a key, or an AIO client that names no session on every
// call, growing the server (goroutines, buffers) and its sandbox (shells)
// without bound; a revoked key's sessions living on.
package sessions

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
)

// Session is what the table holds.
type Session interface {
	// Busy reports a command running or a client attached: a busy session
	// is never evicted or reaped for idleness.
	Busy() bool
	// LastUsed is when a client last used the session.
	LastUsed() time.Time
	// Ended reports that the session ended on its own (its process exited).
	Ended() bool
	// Close ends the session and frees what it holds (process, buffers,
	// goroutines). It may block for a while; the table calls it without
	// holding its lock.
	Close()
}

// Key names a session: its kind ("shell", "bash", "code" …), its
// sandbox, the key that owns it and its id. The owner is part of the name:
// ids are scoped to their owner, so a key that names an id another key
// uses gets (or starts) a session of its own, never the other's, and
// cannot learn that the id is taken.
type Key struct {
	Kind    string
	Sandbox string
	Owner   string
	ID      string
}

// IDRule says what a client-chosen session id may be (IDPattern).
const IDRule = "a session id is 1-128 characters: letters, digits, '.', '_', ':' or '-', starting with a letter or digit"

// IDPattern is the one format of client-chosen session ids (shell, bash,
// code, jupyter, nodejs).
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// CheckID refuses an id outside IDPattern, naming field.
func CheckID(field, id string) error {
	if !IDPattern.MatchString(id) {
		return fault.InvalidField(field, IDRule)
	}
	return nil
}

// Limits of a Table. Zero values take the defaults below.
type Limits struct {
	// PerKey caps the sessions of one key, all kinds and sandboxes.
	PerKey int
	// PerSandbox caps the sessions in one sandbox, all keys and kinds
	// (each is at least one process of the sandbox's pids budget).
	PerSandbox int
	// Idle is the default idle timeout (Reserve may give a shorter one).
	Idle time.Duration
	// EndedKeep is how long a session that ended on its own stays
	// listed, so a client can still read how it ended (at most its idle
	// timeout).
	EndedKeep time.Duration
}

// Defaults, with their reasons.
const (
	// DefaultPerKey: an agent framework keeps a handful of named sessions.
	DefaultPerKey = 32
	// DefaultPerSandbox: the per-sandbox execution cap; each session is a
	// process of the sandbox's pids budget (50 by default).
	DefaultPerSandbox = 16
	// DefaultIdle is AIO's session expiry.
	DefaultIdle = 30 * time.Minute
	// DefaultEndedKeep: long enough to read a result after the end.
	DefaultEndedKeep = 2 * time.Minute
)

// entry is one row; s is nil while the session starts (a reservation).
type entry[S Session] struct {
	s     S
	ok    bool
	owner string
	idle  time.Duration
	since time.Time // reservation time, for a reservation's LRU order
}

// busyRetry is the Retry-After (seconds) of a refusal at a cap whose
// sessions are all busy: a polling interval, commands end any time.
const busyRetry = 1

// Table holds sessions of type S.
type Table[S Session] struct {
	lim Limits

	// mu guards rows.
	mu   sync.Mutex
	rows map[Key]*entry[S]
}

// New returns an empty table.
func New[S Session](l Limits) *Table[S] {
	if l.PerKey <= 0 {
		l.PerKey = DefaultPerKey
	}
	if l.PerSandbox <= 0 {
		l.PerSandbox = DefaultPerSandbox
	}
	if l.Idle <= 0 {
		l.Idle = DefaultIdle
	}
	if l.EndedKeep <= 0 {
		l.EndedKeep = DefaultEndedKeep
	}
	return &Table[S]{lim: l, rows: map[Key]*entry[S]{}}
}

// Limits returns the table's limits (defaults filled in).
func (t *Table[S]) Limits() Limits { return t.lim }

// Reservation is a claimed key whose session is being started.
type Reservation[S Session] struct {
	t *Table[S]
	k Key
	e *entry[S]
}

// ErrExists: Reserve of a key already in the table.
var ErrExists = fault.New(fault.Conflict, "a session with this id exists")

// Reserve claims k for owner (k.Owner is set to owner) with idle timeout
// idle (0: the table's).
// At the per-key or per-sandbox cap it closes the least recently used
// idle session of that key or sandbox; if all are busy it refuses with
// a conflict naming the cap. The caller starts the session and then
// calls Commit, or Cancel if starting failed.
func (t *Table[S]) Reserve(owner string, k Key, idle time.Duration) (*Reservation[S], error) {
	k.Owner = owner
	if idle <= 0 || idle > t.lim.Idle {
		idle = t.lim.Idle
	}
	t.mu.Lock()
	if _, ok := t.rows[k]; ok {
		t.mu.Unlock()
		return nil, ErrExists
	}
	var evicted []S
	for _, c := range []struct {
		match func(Key, *entry[S]) bool
		limit int
		what  string
	}{
		{func(_ Key, e *entry[S]) bool { return e.owner == owner }, t.lim.PerKey, "per key"},
		{func(x Key, _ *entry[S]) bool { return x.Sandbox == k.Sandbox }, t.lim.PerSandbox, "per sandbox"},
	} {
		n := 0
		var lruK Key
		var lru *entry[S]
		var lruAt time.Time
		for x, e := range t.rows {
			if !c.match(x, e) {
				continue
			}
			n++
			if !e.ok || e.s.Busy() {
				continue
			}
			at := e.s.LastUsed()
			if e.s.Ended() {
				at = time.Time{} // an ended session goes first
			}
			if lru == nil || at.Before(lruAt) {
				lruK, lru, lruAt = x, e, at
			}
		}
		if n < c.limit {
			continue
		}
		if lru == nil {
			t.mu.Unlock()
			for _, s := range evicted {
				go s.Close()
			}
			return nil, &fault.Error{Kind: fault.RateLimited, RetryAfter: busyRetry,
				Msg: fmt.Sprintf("at most %d sessions %s, all busy: retry when one is free, or end one", c.limit, c.what)}
		}
		delete(t.rows, lruK)
		evicted = append(evicted, lru.s)
	}
	e := &entry[S]{owner: owner, idle: idle, since: time.Now()}
	t.rows[k] = e
	t.mu.Unlock()
	for _, s := range evicted {
		go s.Close()
	}
	return &Reservation[S]{t: t, k: k, e: e}, nil
}

// Commit puts the started session in the reserved row. If the row was
// removed meanwhile (the key revoked, the sandbox deleted) the session is
// closed and Commit reports false.
func (r *Reservation[S]) Commit(s S) bool {
	r.t.mu.Lock()
	if r.t.rows[r.k] != r.e {
		r.t.mu.Unlock()
		s.Close()
		return false
	}
	r.e.s, r.e.ok = s, true
	r.t.mu.Unlock()
	return true
}

// Cancel frees the reserved row.
func (r *Reservation[S]) Cancel() {
	r.t.mu.Lock()
	if r.t.rows[r.k] == r.e {
		delete(r.t.rows, r.k)
	}
	r.t.mu.Unlock()
}

// Get returns the session at k and its owner.
func (t *Table[S]) Get(k Key) (s S, owner string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.rows[k]
	if e == nil || !e.ok {
		return s, "", false
	}
	return e.s, e.owner, true
}

// Find returns the started sessions of any owner named kind, sandbox and
// id (for callers that may see every key's sessions: admins), sorted by
// owner so the answer is stable.
func (t *Table[S]) Find(kind, sandbox, id string) []Row[S] {
	rows := t.Select(func(k Key, _ string) bool { return k.Kind == kind && k.Sandbox == sandbox && k.ID == id })
	sort.Slice(rows, func(i, j int) bool { return rows[i].Owner < rows[j].Owner })
	return rows
}

// SetIdle changes the idle timeout of the session at k (0 or above the
// table's: the table's) and reports whether it is there.
func (t *Table[S]) SetIdle(k Key, idle time.Duration) bool {
	if idle <= 0 || idle > t.lim.Idle {
		idle = t.lim.Idle
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.rows[k]
	if e == nil || !e.ok {
		return false
	}
	e.idle = idle
	return true
}

// IdleOf is the idle timeout of the session at k (0 if absent).
func (t *Table[S]) IdleOf(k Key) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.rows[k]; e != nil {
		return e.idle
	}
	return 0
}

// Remove takes s out of the table if it is still at k; the caller closes it.
func (t *Table[S]) Remove(k Key, s Session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.rows[k]
	if e == nil || !e.ok || Session(e.s) != s {
		return false
	}
	delete(t.rows, k)
	return true
}

// Row is one session as Select and RemoveWhere see it.
type Row[S Session] struct {
	Key     Key
	Owner   string
	Session S
}

// Select returns the started sessions for which keep is true.
func (t *Table[S]) Select(keep func(Key, string) bool) []Row[S] {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Row[S]
	for k, e := range t.rows {
		if e.ok && keep(k, e.owner) {
			out = append(out, Row[S]{k, e.owner, e.s})
		}
	}
	return out
}

// RemoveWhere takes out every row (reservations included) for which
// match is true and returns the started sessions; the caller closes them
// (CloseAll).
func (t *Table[S]) RemoveWhere(match func(Key, string) bool) []S {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []S
	for k, e := range t.rows {
		if match(k, e.owner) {
			delete(t.rows, k)
			if e.ok {
				out = append(out, e.s)
			}
		}
	}
	return out
}

// Revoke removes and closes every session owner holds, and waits for the
// closes (bounded by each session's Close). It returns how many it closed.
func (t *Table[S]) Revoke(owner string) int {
	ss := t.RemoveWhere(func(_ Key, o string) bool { return o == owner })
	CloseAll(ss)
	return len(ss)
}

// CloseAll closes ss concurrently and waits for every Close.
func CloseAll[S Session](ss []S) {
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Close()
		}()
	}
	wg.Wait()
}

// Len is the number of rows (reservations included).
func (t *Table[S]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.rows)
}

// Reap removes and closes the sessions idle past their timeout (not
// busy) and those that ended on their own longer than EndedKeep ago. It
// returns what it removed.
func (t *Table[S]) Reap(now time.Time) []Row[S] {
	t.mu.Lock()
	var out []Row[S]
	for k, e := range t.rows {
		if !e.ok {
			continue
		}
		idle := now.Sub(e.s.LastUsed())
		if e.s.Ended() && idle > min(t.lim.EndedKeep, e.idle) || !e.s.Ended() && !e.s.Busy() && idle > e.idle {
			delete(t.rows, k)
			out = append(out, Row[S]{k, e.owner, e.s})
		}
	}
	t.mu.Unlock()
	ss := make([]S, len(out))
	for i, r := range out {
		ss[i] = r.Session
	}
	CloseAll(ss)
	return out
}

// Run reaps every interval until ctx ends; report (if not nil) is told
// about each reaped session.
func (t *Table[S]) Run(ctx context.Context, every time.Duration, report func(Row[S])) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tk.C:
			for _, r := range t.Reap(now) {
				if report != nil {
					report(r)
				}
			}
		}
	}
}
