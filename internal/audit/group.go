package audit

import (
	"context"
	"errors"
	"fmt"
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

// WithGroupCommit sets the largest batch and the most appends queued or
// committing at once. WithGroupCommit(1, 1) is the old path: one append at a
// time, each in its own transaction.
func WithGroupCommit(maxBatch, maxPending int) Option {
	return func(l *Log) {
		l.maxBatch = min(max(maxBatch, 1), store.MaxAuditBatch)
		l.maxPending = max(maxPending, 1)
	}
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
	done chan outcome      // one message at a time (buffer 1): the lead, then the result
	// taken is set (under group.mu) when a leader puts it in its batch.
	taken bool
}

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

	// mu guards queue and leading. Invariant: leading is false only while
	// queue is empty; while it is true exactly one append leads, and the
	// lead passes to queue[0] when its batch is done.
	mu      sync.Mutex
	queue   []*pending
	leading bool
}

// groupStats are the counters behind Stats.
type groupStats struct {
	batches, records atomic.Int64
}

// enqueue adds p and reports whether p leads (no commit was under way).
func (g *group) enqueue(p *pending) (lead bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queue = append(g.queue, p)
	lead = !g.leading
	g.leading = true
	return lead
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
	return batch
}

// handOffLocked passes the lead to the queue's front, or ends it. Caller
// holds g.mu. The front's done channel is empty: it is not taken (so it
// has no result) and only the one leader sends a lead.
func (g *group) handOffLocked() {
	if len(g.queue) > 0 {
		g.queue[0].done <- outcome{lead: true}
		return
	}
	g.leading = false
}

// await waits for p's outcome. If ctx ends before a leader took p, p leaves
// the queue (passing on a lead it was just handed) and await returns ctx's
// error: that record is never stored. Once taken, p waits for its batch,
// which ends within batchTimeout, so a caller never hears of a failure for
// a record that was stored.
func (g *group) await(ctx context.Context, p *pending) outcome {
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
	for i, q := range g.queue {
		if q == p {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			break
		}
	}
	select {
	case <-p.done: // the lead, handed over just now: pass it on
		g.handOffLocked()
	default:
	}
	g.mu.Unlock()
	return outcome{err: fmt.Errorf("audit: %w", ctx.Err())}
}

// lead commits one batch from the queue's front (p's own record among
// them), hands the lead on and answers the batch.
// The deferred hand-off also runs if the commit panics (an HTTP server
// recovers a handler's panic and carries on): the batch is answered with
// an error and the next append leads, instead of every later append
// waiting for a leader that is gone.
func (l *Log) lead(ctx context.Context, p *pending) (mine outcome) {
	batch := l.group.take(l.maxBatch)
	var recs []store.AuditRecord
	err := errLeaderPanicked
	defer func() {
		l.group.mu.Lock()
		l.group.handOffLocked()
		l.group.mu.Unlock()
		for i, q := range batch {
			o := outcome{err: err}
			if err == nil {
				o.rec = recs[i]
			}
			if q == p {
				mine = o
				continue
			}
			q.done <- o
		}
	}()
	recs, err = l.commit(ctx, batch)
	return mine
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
