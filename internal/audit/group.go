package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// Group commit. Every call writes its audit record before it is answered,
// and a durable commit costs an fsync (SQLite with synchronous=FULL; a
// PostgreSQL commit). Appends that arrive while a commit is under way are
// therefore gathered and stored by the next commit, one transaction and one
// flush for all of them:
//
//   - An append joins a FIFO queue. If no commit is under way, it leads: it
//     takes the queue's front (itself, and whatever else has arrived, up to
//     maxBatch) and commits it at once. A lone append waits for no timer.
//   - The other appends wait. When the leader's commit ends it hands the
//     lead to the queue's new front (which takes everything that arrived
//     meanwhile), then answers every append of its batch with its record or
//     with the commit's error: the batch is stored whole or not at all, so
//     no caller is told success for a record that is not stored.
//   - At most maxPending appends are queued or committing; more wait for a
//     place (or for their context) before they enter: the queue is bounded.
//   - Begin appends without waiting and without leading: the record rides
//     the next commit, and its Pending's Wait leads one, on the caller's
//     goroutine, if none has taken it by then (a call's record, durable
//     before the command it names starts; dispatch). A record never waited
//     for is committed by the posted appends' timer.
//   - Post appends without waiting and without leading: the record rides
//     the next commit, whoever leads it, or one that a timer starts
//     postedDelay later if none comes (a command's outcome, after its call
//     was answered). Its failure goes to the log's report (the server log).
//
// The chain is unchanged: the leader chains the batch's records in queue
// order onto the store's last record, inside the transaction, as Append did
// one at a time; the head (file or row) moves to the batch's last record.

// Defaults of the group commit.
const (
	// DefaultMaxBatch caps the records of one transaction: enough to
	// absorb every concurrent caller a 2-core host serves (the 64-appender
	// benchmark fills it), small next to store.MaxAuditBatch.
	DefaultMaxBatch = 64
	// DefaultMaxPending caps the appends queued or committing at once;
	// more wait to enter (backpressure) rather than queue without bound.
	DefaultMaxPending = 1024
)

// batchTimeout bounds one batch's transaction. It runs on behalf of
// several callers, so it does not end when the leader's context does; this
// keeps a stalled database (a lock held by a stuck node, a dead connection)
// from holding every queued caller forever. SQLite's own wait for its write
// lock is 5 s.
const batchTimeout = 30 * time.Second

// DefaultPostedDelay is how long a posted record waits for a commit to
// ride before a timer commits it: a crash can lose the posted records of
// that last moment (SECURITY.md, "Audit"). Back-to-back calls commit the
// last one's outcome with the next one's record, so a client that calls
// again within it costs no commit of its own.
const DefaultPostedDelay = 20 * time.Millisecond

// WithGroupCommit sets the largest batch and the most appends queued or
// committing at once. WithGroupCommit(1, 1) is the old path: one append at a
// time, each in its own transaction.
func WithGroupCommit(maxBatch, maxPending int) Option {
	return func(l *Log) {
		l.maxBatch = min(max(maxBatch, 1), store.MaxAuditBatch)
		l.maxPending = max(maxPending, 1)
	}
}

// WithPostedDelay sets how long a posted record waits for a commit to ride
// (DefaultPostedDelay).
func WithPostedDelay(d time.Duration) Option {
	return func(l *Log) { l.postedDelay = max(d, 0) }
}

// WithReport sets where the failures of posted records go (no caller
// waits for them); default: the process's slog logger at Error.
func WithReport(f func(error)) Option { return func(l *Log) { l.reportFn = f } }

func (l *Log) report(err error) {
	if l.reportFn != nil {
		l.reportFn(err)
		return
	}
	slog.Error("audit", "err", err)
}

// Stats counts the committed batches and records of this Log.
type Stats struct {
	Batches int64
	Records int64
}

// Stats returns the batches and records this Log has committed.
func (l *Log) Stats() Stats {
	return Stats{Batches: l.stats.batches.Load(), Records: l.stats.records.Load()}
}

// pending is one append waiting for its batch.
type pending struct {
	rec  store.AuditRecord // redacted fields; the leader sets seq, time, hashes
	kind pendingKind
	// done (waiters only) takes one message at a time (buffer 1): the
	// lead, then the result.
	done chan outcome
	// begun is Begin's handle (kind begun); waiting is set (under
	// group.mu) once its Wait waits, and lead then takes the lead.
	begun   *Pending
	waiting bool
	lead    chan struct{}
	// n is the append's place in the order of arrival (Flush).
	n uint64
	// taken is set (under group.mu) when a leader puts it in its batch;
	// answered once answer gave it its outcome (by its leader's goroutine).
	taken, answered bool
}

// pendingKind says who hears of an append's outcome.
type pendingKind uint8

const (
	// waiter: a caller waits on done (Append, Write) and may lead.
	waiter pendingKind = iota
	// begun: Begin's Pending hears of it; it rides the next commit, and
	// its Wait leads one if none is under way (or is handed the lead).
	begun
	// posted: nobody waits and nothing leads for it: it rides the next
	// commit, or a timer's after postedDelay (Post).
	posted
)

// outcome answers a pending append: its stored record or the batch's error,
// or lead=true, which makes it the next leader.
type outcome struct {
	rec  store.AuditRecord
	err  error
	lead bool
}

// group is the queue of the group commit.
type group struct {
	// slots holds one token per append queued or committing.
	slots chan struct{}

	// mu guards the fields below. Invariant: leading is false only while
	// queue holds no waiter (posted appends, begun ones whose Wait has not
	// started; a timer is armed for them, timerArmed); while it is true
	// exactly one append leads, and the lead passes to the first waiter or
	// waiting begun append in queue when its batch is done.
	mu         sync.Mutex
	queue      []*pending
	leading    bool
	timerArmed bool
	// next numbers the appends as they arrive; inflight counts the batches
	// taken and not yet answered (0 or 1); settled is signalled whenever a
	// batch is answered (Flush waits on it).
	next     uint64
	inflight int
	settled  *sync.Cond
}

// groupStats are the counters behind Stats.
type groupStats struct {
	batches, records atomic.Int64
}

// enqueue adds p and reports whether p leads (no commit was under way, and
// p is not posted). A posted append that finds no commit under way arms
// the timer that commits it (arm).
func (g *group) enqueue(p *pending) (lead, arm bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next++
	p.n = g.next
	g.queue = append(g.queue, p)
	switch {
	case g.leading:
		return false, false
	case p.kind != waiter:
		arm = !g.timerArmed
		g.timerArmed = true
		return false, arm
	}
	g.leading = true
	return true, false
}

// take removes the batch's appends from the queue's front.
func (g *group) take(maxBatch int) []*pending {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.queue), maxBatch)
	batch := make([]*pending, n)
	copy(batch, g.queue)
	for _, p := range batch {
		p.taken = true
	}
	clear(g.queue[:n])
	g.queue = g.queue[n:]
	if len(g.queue) == 0 {
		g.queue = nil
	}
	g.inflight++
	return batch
}

// handOffLocked passes the lead to the first append in the queue whose
// caller waits — a waiter hears of it on done (which is empty: it is not
// taken, so it has no result, and only the one leader sends a lead), a
// begun append whose Wait waits on lead — or ends it; what is left in the
// queue (posted appends, begun ones not waited for yet) gets the timer.
// Caller holds g.mu.
func (l *Log) handOffLocked() {
	g := &l.group
	for _, q := range g.queue {
		switch {
		case q.kind == waiter:
			q.done <- outcome{lead: true}
			return
		case q.kind == begun && q.waiting:
			q.lead <- struct{}{}
			return
		}
	}
	g.leading = false
	if len(g.queue) > 0 && !g.timerArmed {
		g.timerArmed = true
		time.AfterFunc(l.postedDelay, l.commitPosted)
	}
}

// commitPosted is the timer of posted appends that no other commit took
// along: it leads a commit of them unless one is under way.
func (l *Log) commitPosted() {
	g := &l.group
	g.mu.Lock()
	g.timerArmed = false
	if g.leading || len(g.queue) == 0 {
		g.mu.Unlock()
		return
	}
	g.leading = true
	p := g.queue[0]
	g.mu.Unlock()
	l.leadFor(context.Background(), p)
}

// await waits for p's outcome. If ctx ends before a leader took p, p leaves
// the queue (passing on a lead it was just handed) and await returns ctx's
// error: that record is never stored. Once taken, p waits for its batch,
// which ends within batchTimeout, so a caller never hears of a failure for
// a record that was stored.
func (l *Log) await(ctx context.Context, p *pending) outcome {
	g := &l.group
	select {
	case o := <-p.done:
		return o
	case <-ctx.Done():
	}
	g.mu.Lock()
	if p.taken {
		g.mu.Unlock()
		return <-p.done
	}
	g.removeLocked(p)
	select {
	case <-p.done: // the lead, handed over just now: pass it on
		l.handOffLocked()
	default:
	}
	g.settled.Broadcast()
	g.mu.Unlock()
	return outcome{err: fmt.Errorf("audit: %w", ctx.Err())}
}

// removeLocked takes p, not yet taken, out of the queue. Caller holds g.mu.
func (g *group) removeLocked(p *pending) {
	for i, q := range g.queue {
		if q == p {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return
		}
	}
}

// leadFor leads on behalf of an append that is not a waiter (posted, or
// begun) and answers it. A commit that panics is answered as failed and
// reported; the process carries on, as it does when a caller's own lead
// panics inside an HTTP handler.
func (l *Log) leadFor(ctx context.Context, p *pending) {
	defer func() {
		if r := recover(); r != nil {
			l.report(fmt.Errorf("%w: %v", errLeaderPanicked, r))
			if !p.answered {
				l.answer(p, outcome{err: errLeaderPanicked})
			}
		}
	}()
	mine := l.lead(ctx, p)
	if !p.answered {
		l.answer(p, mine)
	}
}

// answer gives a batch's outcome to an append other than the leader's own.
func (l *Log) answer(q *pending, o outcome) {
	q.answered = true
	switch q.kind {
	case waiter:
		q.done <- o
	case begun:
		q.begun.settle(o)
		<-l.group.slots
	case posted:
		if o.err != nil {
			l.report(fmt.Errorf("a record posted to ride the next commit (%s) was not stored: %w", q.rec.Action, o.err))
		}
		<-l.group.slots
	}
}

// lead commits batches from the queue's front until one holds p, hands the
// lead on and answers every batch. p is among the first batch unless posted
// appends were queued before it (they ride along; more than maxBatch of them
// take a batch or more of their own first).
func (l *Log) lead(ctx context.Context, p *pending) outcome {
	for {
		if mine, done := l.leadBatch(ctx, p); done {
			return mine
		}
	}
}

// leadBatch commits one batch from the queue's front. The deferred
// hand-off also runs if the commit panics (an HTTP server recovers a
// handler's panic and carries on): the batch is answered with an error, p
// leaves the queue if it was not in it, and the next append leads, instead
// of every later append waiting for a leader that is gone. The appends of
// Begin hear of their batch first: a command held until its record is
// durable (dispatch) waits for nothing else.
func (l *Log) leadBatch(ctx context.Context, p *pending) (mine outcome, done bool) {
	batch := l.group.take(l.maxBatch)
	done = slices.Contains(batch, p)
	var recs []store.AuditRecord
	err := errLeaderPanicked
	defer func() {
		result := func(i int) outcome {
			if err != nil {
				return outcome{err: err}
			}
			return outcome{rec: recs[i]}
		}
		for i, q := range batch {
			if q.kind == begun {
				l.answer(q, result(i))
			}
		}
		g := &l.group
		g.mu.Lock()
		g.inflight--
		if !done && errors.Is(err, errLeaderPanicked) {
			g.removeLocked(p)
			done = true
		}
		if done {
			l.handOffLocked()
		}
		g.settled.Broadcast()
		g.mu.Unlock()
		for i, q := range batch {
			if q == p {
				mine = result(i)
				continue
			}
			if q.kind != begun {
				l.answer(q, result(i))
			}
		}
	}()
	recs, err = l.commit(ctx, batch)
	return mine, done
}

// Flush returns once every append made before it has been answered: posted
// appends waiting for a commit to ride are committed now. Readers call it
// so they see the records of calls already answered (Query, Verify), and
// Close does.
func (l *Log) Flush() {
	g := &l.group
	g.mu.Lock()
	target := g.next
	for len(g.queue) > 0 && g.queue[0].n <= target || g.inflight > 0 {
		if !g.leading && len(g.queue) > 0 {
			// Posted appends alone, waiting for their timer: commit them.
			g.leading = true
			p := g.queue[0]
			g.mu.Unlock()
			l.leadFor(context.Background(), p)
			g.mu.Lock()
			continue
		}
		g.settled.Wait()
	}
	g.mu.Unlock()
}

// chain stamps recs (time, seq, links, hashes) to follow last, in order.
func (l *Log) chain(recs []store.AuditRecord, last store.AuditRecord, ok bool) ([]store.AuditRecord, error) {
	out := make([]store.AuditRecord, len(recs))
	for i, r := range recs {
		t := l.now().UTC().Round(0)
		r.Time = time.Unix(0, t.UnixNano()).UTC()
		r.Seq, r.PrevHash = 1, GenesisHash
		if ok {
			r.Seq, r.PrevHash = last.Seq+1, last.Hash
		}
		var err error
		if r.Hash, err = HashOf(r); err != nil {
			return nil, err
		}
		out[i] = r
		last, ok = r, true
	}
	return out, nil
}

// errLeaderPanicked answers a batch whose commit panicked.
var errLeaderPanicked = errors.New("audit: the batch's commit failed")

// commit chains and stores one batch in one transaction, then moves the
// head file to the batch's last record.
//
// Order: the batch holds the data dir's lock file from before its
// transaction until the head is written, so appenders in other processes
// (the CLI) write heads in seq order too. The head is written
// only after the commit, so it never names a record that is not stored: a
// crash between the two leaves it behind by one batch, which Verify accepts
// and the next batch moves on from (headAgrees).
func (l *Log) commit(ctx context.Context, batch []*pending) ([]store.AuditRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	unlock, err := l.lockF.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	// sealHead is decided inside the transaction: the head file moves only
	// while it names a stored record. Once it does not (a truncated or
	// edited log) it stays where it was, so appending more records can
	// never paper over the damage; Verify keeps failing.
	sealHead := false
	recs, err := l.st.AppendAuditBatch(ctx, func(last store.AuditRecord, ok bool) ([]store.AuditRecord, error) {
		var err error
		if sealHead, err = l.headAgrees(ctx, last, ok); err != nil {
			return nil, err
		}
		recs := make([]store.AuditRecord, len(batch))
		for i, q := range batch {
			recs[i] = q.rec
		}
		return l.chain(recs, last, ok)
	}, nil)
	if err != nil {
		return nil, err
	}
	l.stats.batches.Add(1)
	l.stats.records.Add(int64(len(recs)))
	if sealHead {
		// The records are stored, but a head that cannot move is a log
		// whose end is no longer sealed: the calls fail closed, as they
		// did when the head was written inside the transaction.
		if err := l.writeHead(recs[len(recs)-1]); err != nil {
			return nil, fmt.Errorf("audit: records %d..%d stored, but: %w", recs[0].Seq, recs[len(recs)-1].Seq, err)
		}
	}
	return recs, nil
}

// drive is a begun append's Wait: it returns once the append is answered,
// leading the commit itself when none is under way or the lead is handed
// to it, so a caller that has something else to do first (send the command
// it holds to the init) commits on its own goroutine, after that, with no
// goroutine started and no thread woken for it.
func (l *Log) drive(p *pending) {
	g := &l.group
	g.mu.Lock()
	switch {
	case p.taken:
		g.mu.Unlock()
		<-p.begun.done
		return
	case !g.leading:
		g.leading = true
		g.mu.Unlock()
	default:
		p.waiting = true
		g.mu.Unlock()
		select {
		case <-p.begun.done:
			return
		case <-p.lead:
		}
	}
	l.leadFor(context.Background(), p)
}
