package outbuf

import (
	"container/list"
	"runtime"
	"sync"
	"weak"
)

// Budget bounds the bytes that Outputs keep in server memory, per account
// (an API key) and in all. What it stops: one tenant's commands printing
// until the server runs out of memory — each stream kept its own cap (up
// to 10 MiB), times every finished execution a sandbox remembers, times
// every sandbox of a key: 20 executions writing 11 MB each to stderr took
// the server from 54 MB to 947 MB.
//
// An Output charges the budget as its buffers grow. When a charge would
// pass the account's share or the total, the oldest finished Outputs go
// first — the account's own for its share, anyone's for the total — and
// lose their bytes (Evicted); a reader then learns the bytes are gone
// rather than reading nothing. A running Output is never evicted: when no
// finished one is left to give room, it stops growing and keeps what it
// holds (its head, and a smaller ring of the latest bytes), counting the
// rest as dropped, like any truncated stream.
//
// Outputs nobody holds any more give their bytes back when the garbage
// collector takes them (runtime.AddCleanup), so an owner that forgets one
// cannot leak budget; Release gives them back at once.
//
// Lock order: an Output's mu before the Budget's mu. Eviction takes a
// finished Output's mu under the Budget's mu; a finished Output never
// waits for the Budget while holding its own.
type Budget struct {
	total, perAccount int64

	// mu guards everything below and the entries' fields.
	mu       sync.Mutex
	used     int64
	accounts map[string]*account
	finished list.List // *entry, oldest first, across accounts
	evicted  int64     // Outputs evicted in all (tests, metrics)
}

type account struct {
	name     string
	used     int64
	live     int       // entries not yet done
	finished list.List // *entry, oldest first
}

// entry is an Output's charge. It holds the Output only weakly, so the
// lists never keep a forgotten Output alive.
type entry struct {
	acct    *account
	out     weak.Pointer[Output]
	charged int64
	// gElem and aElem are its places in the finished lists, nil until
	// the Output is closed with bytes charged.
	gElem, aElem *list.Element
	// done: uncharged for good (evicted, released or collected).
	done bool
}

// NewBudget bounds kept output to total bytes in all and perAccount bytes
// per account. Non-positive values mean no bound of that kind.
func NewBudget(total, perAccount int64) *Budget {
	const unbounded = int64(^uint64(0) >> 1)
	if total <= 0 {
		total = unbounded
	}
	if perAccount <= 0 {
		perAccount = unbounded
	}
	return &Budget{total: total, perAccount: perAccount, accounts: map[string]*account{}}
}

// NewOutput is NewOutput(limit) charged to account. A nil Budget makes an
// unbudgeted Output.
func (b *Budget) NewOutput(acct string, limit int) *Output {
	o := NewOutput(limit)
	if b == nil {
		return o
	}
	b.mu.Lock()
	a := b.accounts[acct]
	if a == nil {
		a = &account{name: acct}
		b.accounts[acct] = a
	}
	a.live++
	e := &entry{acct: a, out: weak.Make(o)}
	b.mu.Unlock()
	o.budget, o.ent = b, e
	runtime.AddCleanup(o, b.collected, e)
	return o
}

// Used reports the bytes charged in all and to acct.
func (b *Budget) Used(acct string) (total, ofAccount int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a := b.accounts[acct]; a != nil {
		ofAccount = a.used
	}
	return b.used, ofAccount
}

// Evictions reports how many Outputs lost their bytes to the budget.
func (b *Budget) Evictions() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.evicted
}

// reserve asks for delta more bytes for e's Output (running: its mu is
// held), evicting finished Outputs to make room; it grants what fits,
// possibly less than asked, possibly 0.
func (b *Budget) reserve(e *entry, delta int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.done || delta <= 0 {
		return 0
	}
	a := e.acct
	for a.used+delta > b.perAccount && a.finished.Len() > 0 {
		b.evictLocked(a.finished.Front().Value.(*entry), true)
	}
	for b.used+delta > b.total && b.finished.Len() > 0 {
		b.evictLocked(b.finished.Front().Value.(*entry), true)
	}
	g := min(delta, b.perAccount-a.used, b.total-b.used)
	if g <= 0 {
		return 0
	}
	a.used += g
	b.used += g
	e.charged += g
	return g
}

// unreserve gives back n bytes a running Output no longer holds.
func (b *Budget) unreserve(e *entry, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !e.done {
		b.unchargeLocked(e, min(n, e.charged))
	}
}

// finish records that e's Output is closed: give back what it no longer
// holds (freed bytes of trimmed buffers) and queue it for eviction.
func (b *Budget) finish(e *entry, freed int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.done {
		return
	}
	b.unchargeLocked(e, min(freed, e.charged))
	if e.charged > 0 && e.gElem == nil {
		e.gElem = b.finished.PushBack(e)
		e.aElem = e.acct.finished.PushBack(e)
	}
}

// release gives e's bytes back for good, leaving its Output's bytes to its
// owner (Release, or the Output is gone).
func (b *Budget) release(e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.doneLocked(e)
}

// collected is the cleanup of an Output the garbage collector took.
func (b *Budget) collected(e *entry) { b.release(e) }

// evictLocked empties a finished Output and gives its bytes back.
func (b *Budget) evictLocked(e *entry, count bool) {
	b.doneLocked(e)
	if count {
		b.evicted++
	}
	if o := e.out.Value(); o != nil {
		o.drop()
	}
}

func (b *Budget) doneLocked(e *entry) {
	if e.done {
		return
	}
	b.unchargeLocked(e, e.charged)
	if e.gElem != nil {
		b.finished.Remove(e.gElem)
		e.acct.finished.Remove(e.aElem)
		e.gElem, e.aElem = nil, nil
	}
	e.done = true
	e.acct.live--
	if e.acct.live == 0 {
		delete(b.accounts, e.acct.name)
	}
}

func (b *Budget) unchargeLocked(e *entry, n int64) {
	e.charged -= n
	e.acct.used -= n
	b.used -= n
}
