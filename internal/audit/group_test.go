package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testDB is one empty database of a back end.
type testDB struct {
	open func(ctx context.Context) (store.Store, error)
	dir  string // the data dir (its head file)
	exec func(t *testing.T, q string)
	// try runs q and returns its error.
	try func(q string) error
}

// backends are the two stores, each test runs against both (PostgreSQL
// skips where its binaries are not installed).
var backends = []struct {
	name  string
	fresh func(t *testing.T) testDB
}{
	{"sqlite", func(t *testing.T) testDB {
		dir := t.TempDir()
		path := filepath.Join(dir, store.FileName)
		return testDB{
			open: func(ctx context.Context) (store.Store, error) { return store.OpenSQLite(ctx, path) },
			dir:  dir,
			exec: func(t *testing.T, q string) { t.Helper(); mustExec(t, rawDB(t, dir), q) },
			try: func(q string) error {
				db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
				if err != nil {
					return err
				}
				defer func() { _ = db.Close() }()
				_, err = db.Exec(q)
				return err
			},
		}
	}},
	{"postgres", func(t *testing.T) testDB {
		url := pgtest.URL(t)
		return testDB{
			open: func(ctx context.Context) (store.Store, error) { return store.OpenPostgres(ctx, url) },
			dir:  t.TempDir(),
			exec: func(t *testing.T, q string) {
				t.Helper()
				if err := pgExec(url, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			},
			try: func(q string) error { return pgExec(url, q) },
		}
	}},
}

// pgExec runs q on the database at url.
func pgExec(url, q string) error {
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	_, err = c.Exec(context.Background(), q)
	return err
}

func eachBackend(t *testing.T, fn func(t *testing.T, db testDB)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.fresh(t)) })
	}
}

func openStore(t *testing.T, db testDB) store.Store {
	t.Helper()
	st, err := db.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func entry(i int) Entry {
	return Entry{Actor: "key_a", Role: "agent", ClientAddr: "127.0.0.1", Action: "exec.run",
		Target: fmt.Sprint("echo ", i), Sandbox: "sb_1", Verdict: Allow, Detail: map[string]any{"i": i}}
}

// storedBySeq reads every record.
func storedBySeq(t *testing.T, st store.Store) map[int64]store.AuditRecord {
	t.Helper()
	out := map[int64]store.AuditRecord{}
	if err := st.ScanAudit(context.Background(), func(r store.AuditRecord) error { out[r.Seq] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustVerify(t *testing.T, l *Log, records int64) {
	t.Helper()
	res, err := l.Verify(context.Background())
	if err != nil || !res.OK || res.Records != records {
		t.Fatalf("verify = %+v (%v), want OK with %d records", res, err, records)
	}
}

// N goroutines append at once: every record is stored once, in one chain,
// and every caller got back exactly the record that is stored.
func TestGroupCommitConcurrentAppends(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l := New(openStore(t, db), db.dir)
		const goroutines, per = 64, 4
		got := make([][]Record, goroutines)
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range per {
					r, err := l.Append(context.Background(), entry(g*per+i))
					if err != nil {
						errs[g] = err
						return
					}
					got[g] = append(got[g], r)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		stored := storedBySeq(t, l.st)
		if len(stored) != goroutines*per {
			t.Fatalf("%d records stored, want %d", len(stored), goroutines*per)
		}
		seen := map[int64]bool{}
		for g := range got {
			for _, r := range got[g] {
				s, ok := stored[r.Seq]
				if !ok || s.Hash != r.Hash || s.PrevHash != r.PrevHash || s.Target != r.Target || seen[r.Seq] {
					t.Fatalf("caller got seq %d hash %s; stored %+v (seen before: %v)", r.Seq, r.Hash, s, seen[r.Seq])
				}
				seen[r.Seq] = true
			}
		}
		mustVerify(t, l, goroutines*per)
		st := l.Stats()
		if st.Records != goroutines*per || st.Batches < 1 || st.Batches > st.Records {
			t.Fatalf("stats = %+v", st)
		}
		t.Logf("%d appends in %d transactions", st.Records, st.Batches)
	})
}

// gatedStore holds the next batch at its start until released, so a test
// can queue appends behind it, and records the size of every batch.
type gatedStore struct {
	store.Store
	mu      sync.Mutex
	sizes   []int
	hold    chan struct{} // the next batch waits for this to close
	entered chan struct{} // closed when the held batch has started
}

func (g *gatedStore) gateNext() (entered, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.entered = make(chan struct{}), make(chan struct{})
	return g.entered, g.hold
}

func (g *gatedStore) AppendAuditBatch(ctx context.Context, build func(store.AuditRecord, bool) ([]store.AuditRecord, error), before func(store.AuditRecord) error) ([]store.AuditRecord, error) {
	g.mu.Lock()
	hold, entered := g.hold, g.entered
	g.hold, g.entered = nil, nil
	g.mu.Unlock()
	if hold != nil {
		close(entered)
		<-hold
	}
	return g.Store.AppendAuditBatch(ctx, func(last store.AuditRecord, ok bool) ([]store.AuditRecord, error) {
		recs, err := build(last, ok)
		g.mu.Lock()
		g.sizes = append(g.sizes, len(recs))
		g.mu.Unlock()
		return recs, err
	}, before)
}

func (g *gatedStore) batchSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.sizes...)
}

// gatedLog is a Log over a gate on db's store.
func gatedLog(t *testing.T, db testDB, opts ...Option) (*Log, *gatedStore) {
	t.Helper()
	st := openStore(t, db)
	g := &gatedStore{Store: st}
	return New(g, db.dir, opts...), g
}

// waitQueued waits (bounded) until n appends are queued behind the leader.
func waitQueued(t *testing.T, l *Log, n int) {
	t.Helper()
	for range 10000 {
		l.group.mu.Lock()
		q := len(l.group.queue)
		l.group.mu.Unlock()
		if q == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("appends never queued up to %d", n)
}

type result struct {
	rec Record
	err error
}

// startAppends starts n appends and returns their results' channel.
func startAppends(l *Log, from, n int, action string) chan result {
	out := make(chan result, n)
	for i := range n {
		go func() {
			e := entry(from + i)
			if action != "" && i == n/2 {
				e.Action = action
			}
			r, err := l.Append(context.Background(), e)
			out <- result{r, err}
		}()
	}
	return out
}

// A lone append commits at once, alone; the appends that arrive while a
// commit is under way share the next transaction.
func TestGroupCommitQueuedAppendsShareOneTransaction(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l, g := gatedLog(t, db)
		if _, err := l.Append(context.Background(), entry(0)); err != nil {
			t.Fatal(err)
		}
		if s := g.batchSizes(); len(s) != 1 || s[0] != 1 {
			t.Fatalf("a lone append made batches %v, want [1]", s)
		}
		entered, release := g.gateNext()
		first := startAppends(l, 1, 1, "")
		<-entered
		const queued = 40
		rest := startAppends(l, 2, queued, "")
		waitQueued(t, l, queued)
		close(release)
		if r := <-first; r.err != nil {
			t.Fatal(r.err)
		}
		for range queued {
			if r := <-rest; r.err != nil {
				t.Fatal(r.err)
			}
		}
		if s := g.batchSizes(); fmt.Sprint(s) != fmt.Sprint([]int{1, 1, queued}) {
			t.Fatalf("batches %v, want [1 1 %d]", s, queued)
		}
		mustVerify(t, l, queued+2)
		if st := l.Stats(); st.Batches != 3 || st.Records != queued+2 {
			t.Fatalf("stats = %+v", st)
		}
	})
}

// poisonSQL makes each backend refuse a record whose action is
// poison.record (a real constraint, not an injected error).
var poisonSQL = map[string]string{
	"sqlite":   `CREATE TRIGGER poison BEFORE INSERT ON audit WHEN NEW.action = 'poison.record' BEGIN SELECT RAISE(ABORT, 'poisoned record'); END`,
	"postgres": `ALTER TABLE audit ADD CONSTRAINT poison CHECK (action <> 'poison.record')`,
}

// A store error fails every append of the batch: one record the database
// refuses (a real constraint, not an injected error) and none of the
// batch's callers is told its record was stored, none of them is, and the
// chain goes on intact.
func TestGroupCommitStoreErrorFailsTheWholeBatch(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.fresh(t)
			l, g := gatedLog(t, db)
			if _, err := l.Append(context.Background(), entry(0)); err != nil {
				t.Fatal(err)
			}
			db.exec(t, poisonSQL[b.name])
			entered, release := g.gateNext()
			first := startAppends(l, 1, 1, "")
			<-entered
			const queued = 20
			rest := startAppends(l, 2, queued, "poison.record")
			waitQueued(t, l, queued)
			close(release)
			if r := <-first; r.err != nil {
				t.Fatal(r.err)
			}
			for range queued {
				r := <-rest
				if r.err == nil {
					t.Fatalf("an append of the failed batch reported success: seq %d", r.rec.Seq)
				}
				if strings.Contains(r.err.Error(), db.dir) {
					t.Errorf("error names the data dir: %v", r.err)
				}
			}
			if s := g.batchSizes(); fmt.Sprint(s) != fmt.Sprint([]int{1, 1, queued}) {
				t.Fatalf("batches %v, want [1 1 %d]", s, queued)
			}
			if n := len(storedBySeq(t, l.st)); n != 2 {
				t.Fatalf("%d records stored, want the 2 before the failed batch", n)
			}
			mustVerify(t, l, 2)
			if _, err := l.Append(context.Background(), entry(99)); err != nil {
				t.Fatalf("append after a failed batch: %v", err)
			}
			mustVerify(t, l, 3)
		})
	}
}

// The queue is bounded: with every place taken, one more append waits
// outside it (and gives up with its context, unstored); batches never
// exceed their cap.
func TestGroupCommitBackpressure(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		const maxBatch, maxPending = 2, 4
		l, g := gatedLog(t, db, WithGroupCommit(maxBatch, maxPending))
		entered, release := g.gateNext()
		first := startAppends(l, 0, 1, "")
		<-entered
		rest := startAppends(l, 1, maxPending-1, "")
		waitQueued(t, l, maxPending-1)

		ctx, cancel := context.WithCancel(context.Background())
		over := make(chan error, 1)
		go func() {
			e := entry(100)
			e.Target = "over the bound"
			_, err := l.Append(ctx, e)
			over <- err
		}()
		// It cannot enter: every place is held. (Sampled while it runs: a
		// queue without a bound shows it here.)
		for range 20 {
			time.Sleep(time.Millisecond)
			l.group.mu.Lock()
			q := len(l.group.queue)
			l.group.mu.Unlock()
			if q > maxPending-1 {
				t.Fatalf("queue grew to %d past its bound %d", q, maxPending-1)
			}
		}
		cancel()
		if err := <-over; !errors.Is(err, context.Canceled) {
			t.Fatalf("append over the bound = %v, want context.Canceled", err)
		}
		close(release)
		for _, c := range []chan result{first, rest} {
			for range cap(c) {
				if r := <-c; r.err != nil {
					t.Fatal(r.err)
				}
			}
		}
		for _, s := range g.batchSizes() {
			if s > maxBatch {
				t.Fatalf("batch of %d over the cap %d: %v", s, maxBatch, g.batchSizes())
			}
		}
		for _, r := range storedBySeq(t, l.st) {
			if r.Target == "over the bound" {
				t.Fatal("the append that gave up was stored")
			}
		}
		mustVerify(t, l, maxPending)
	})
}

// An append whose context ends while it is queued leaves the queue and is
// never stored; the others go on.
func TestGroupCommitCancelledWhileQueued(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l, g := gatedLog(t, db)
		entered, release := g.gateNext()
		first := startAppends(l, 0, 1, "")
		<-entered
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() {
			e := entry(1)
			e.Target = "cancelled"
			_, err := l.Append(ctx, e)
			gone <- err
		}()
		waitQueued(t, l, 1)
		rest := startAppends(l, 2, 5, "")
		waitQueued(t, l, 6)
		cancel()
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled append = %v", err)
		}
		close(release)
		for _, c := range []chan result{first, rest} {
			for range cap(c) {
				if r := <-c; r.err != nil {
					t.Fatal(r.err)
				}
			}
		}
		for _, r := range storedBySeq(t, l.st) {
			if r.Target == "cancelled" {
				t.Fatal("a cancelled append was stored")
			}
		}
		mustVerify(t, l, 6)
	})
}

// Many appenders, some of whose contexts end at random moments (queued,
// leading, handed the lead): what was stored is exactly what was reported
// stored, each with the hash its caller got.
func TestGroupCommitRandomCancellations(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l := New(openStore(t, db), db.dir, WithGroupCommit(8, 64))
		const goroutines, per = 32, 15
		var mu sync.Mutex
		ok := map[string]Record{}
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range per {
					ctx, cancel := context.WithCancel(context.Background())
					// A fixed scatter: a third of the appends are
					// cancelled after 0-500 µs.
					if (g*31+i*17)%3 == 0 {
						d := time.Duration((g*131+i*71)%500) * time.Microsecond
						go func() { time.Sleep(d); cancel() }()
					}
					e := entry(g*per + i)
					e.Target = fmt.Sprintf("g%d-%d", g, i)
					r, err := l.Append(ctx, e)
					cancel()
					if err != nil && !errors.Is(err, context.Canceled) {
						t.Error(err)
						return
					}
					if err == nil {
						mu.Lock()
						ok[e.Target] = r
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		stored := storedBySeq(t, l.st)
		if len(stored) != len(ok) {
			t.Fatalf("%d records stored, %d appends reported stored", len(stored), len(ok))
		}
		for _, s := range stored {
			r, found := ok[s.Target]
			if !found || r.Seq != s.Seq || r.Hash != s.Hash {
				t.Fatalf("stored record %d (%s) does not match what its caller got: %+v", s.Seq, s.Target, r)
			}
		}
		mustVerify(t, l, int64(len(stored)))
		t.Logf("%d of %d appends stored in %d transactions", len(ok), goroutines*per, l.Stats().Batches)
	})
}

// Tampering with records written by concurrent (grouped) appends is found
// as before.
func TestGroupCommitTamperingDetected(t *testing.T) {
	tests := []struct {
		name    string
		tamper  string
		problem string
	}{
		{"edit a record inside a batch", `UPDATE audit SET target = 'x' WHERE seq = 17`, "modified"},
		{"delete a record", `DELETE FROM audit WHERE seq = 30`, "missing"},
		{"cut off the newest records", `DELETE FROM audit WHERE seq > 40`, "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, db testDB) {
				l := New(openStore(t, db), db.dir)
				var wg sync.WaitGroup
				for g := range 16 {
					wg.Go(func() {
						for i := range 4 {
							if _, err := l.Append(context.Background(), entry(g*4+i)); err != nil {
								t.Error(err)
							}
						}
					})
				}
				wg.Wait()
				mustVerify(t, l, 64)
				db.exec(t, tc.tamper)
				res, err := l.Verify(context.Background())
				if err != nil || res.OK || !strings.Contains(res.Problem, tc.problem) {
					t.Fatalf("verify after tampering = %+v (%v), want %q", res, err, tc.problem)
				}
			})
		})
	}
}

// A head file one batch behind the records (a crash between a commit and
// the head's write) is no tampering: Verify accepts it and the next append
// moves it on to the new end.
func TestHeadBehindAfterACrashMovesOn(t *testing.T) {
	l, dir := newLog(t)
	fill(t, l, 5)
	recs, err := l.Query(context.Background(), Filter{})
	if err != nil || len(recs) != 5 {
		t.Fatalf("query: %d %v", len(recs), err)
	}
	head := filepath.Join(dir, HeadFile)
	if err := os.WriteFile(head, fmt.Appendf(nil, "%020d %s\n", 3, recs[2].Hash), 0o600); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, l, 5)
	r, err := l.Append(context.Background(), entry(6))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(head); err != nil || string(b) != fmt.Sprintf("%020d %s\n", r.Seq, r.Hash) {
		t.Fatalf("head = %q (%v), want record %d", b, err, r.Seq)
	}
	mustVerify(t, l, 6)
}

// Two logs on one data dir (two processes: the server and the CLI) write
// the head file in seq order: at the end it names the last record.
func TestHeadFileInSeqOrderAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	var logs []*Log
	for range 2 {
		st, err := store.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		logs = append(logs, New(st, dir))
	}
	var wg sync.WaitGroup
	for _, l := range logs {
		for g := range 8 {
			wg.Go(func() {
				for i := range 10 {
					if _, err := l.Append(context.Background(), entry(g*10+i)); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	res, err := logs[1].Verify(context.Background())
	if err != nil || !res.OK || res.Records != 160 {
		t.Fatalf("verify = %+v %v", res, err)
	}
	hd, _, err := logs[0].readHead()
	if err != nil || hd.seq != 160 || hd.hash != res.HeadHash {
		t.Fatalf("head = %+v (%v), want the last record 160", hd, err)
	}
}
