package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Begin commits nothing: its record rides the next commit, and Wait
// commits it on the calling goroutine when none comes first. OnDurable
// hears of it once stored; a callback added after that runs at once.
func TestBeginRidesTheNextCommitOrWaitCommits(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l, g := gatedLog(t, db, WithPostedDelay(time.Hour))
		p, err := l.Begin(context.Background(), entry(1))
		if err != nil {
			t.Fatal(err)
		}
		fired := make(chan error, 1)
		p.OnDurable(func(err error) { fired <- err })
		if s := g.batchSizes(); len(s) != 0 {
			t.Fatalf("Begin committed: batches %v", s)
		}
		select {
		case <-p.Done():
			t.Fatal("the record reported durable before any commit")
		default:
		}
		if seq, err := p.Wait(); err != nil || seq != 1 {
			t.Fatalf("Wait = %d, %v; want seq 1", seq, err)
		}
		if err := <-fired; err != nil {
			t.Fatal(err)
		}
		late := make(chan error, 1)
		p.OnDurable(func(err error) { late <- err })
		if err := <-late; err != nil {
			t.Fatal(err)
		}

		// Another append's commit takes a begun record along: durable with
		// no Wait of its own.
		q, err := l.Begin(context.Background(), entry(2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(context.Background(), entry(3)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-q.Done():
		default:
			t.Fatal("the begun record did not ride the next commit")
		}

		// With a commit under way, Wait waits for it and is handed the
		// lead of the next.
		entered, release := g.gateNext()
		first := startAppends(l, 4, 1, "")
		<-entered
		r, err := l.Begin(context.Background(), entry(5))
		if err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { _, err := r.Wait(); waited <- err }()
		waitWaiting(t, l)
		close(release)
		if res := <-first; res.err != nil {
			t.Fatal(res.err)
		}
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
		if s := g.batchSizes(); fmt.Sprint(s) != "[1 2 1 1]" {
			t.Fatalf("batches %v, want [1 2 1 1]", s)
		}
		mustVerify(t, l, 5)
	})
}

// waitWaiting waits (bounded) until a begun record's Wait waits for the
// lead.
func waitWaiting(t *testing.T, l *Log) {
	t.Helper()
	for range 10000 {
		l.group.mu.Lock()
		w := len(l.group.queue) == 1 && l.group.queue[0].waiting
		l.group.mu.Unlock()
		if w {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("Wait never waited")
}

// A posted record waits for the next commit and rides it: one transaction
// holds it and the record that came next, in the order they came.
func TestPostRidesTheNextCommit(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l, g := gatedLog(t, db, WithPostedDelay(time.Hour))
		posted := entry(1)
		posted.Action = "exec.run.outcome"
		if err := l.Post(context.Background(), posted); err != nil {
			t.Fatal(err)
		}
		if s := g.batchSizes(); len(s) != 0 {
			t.Fatalf("a posted record committed on its own: batches %v", s)
		}
		p, err := l.Begin(context.Background(), entry(2))
		if err != nil {
			t.Fatal(err)
		}
		if seq, err := p.Wait(); err != nil || seq != 2 {
			t.Fatalf("Wait = %d, %v; want seq 2, after the posted record", seq, err)
		}
		if s := g.batchSizes(); fmt.Sprint(s) != "[2]" {
			t.Fatalf("batches %v, want [2]", s)
		}
		stored := storedBySeq(t, l.st)
		if stored[1].Action != "exec.run.outcome" || stored[2].Target != "echo 2" {
			t.Fatalf("stored %+v", stored)
		}
		mustVerify(t, l, 2)
	})
}

// With no other commit coming, a posted record is committed by its timer;
// Flush commits it at once, and Query and Verify see it.
func TestPostedRecordsAreCommittedWithoutAnotherCall(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		t.Run("timer", func(t *testing.T) {
			l, _ := gatedLog(t, db, WithPostedDelay(time.Millisecond))
			if err := l.Post(context.Background(), entry(1)); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(time.Minute)
			for l.Stats().Records != 1 {
				if time.Now().After(deadline) {
					t.Fatal("the posted record was never committed")
				}
				time.Sleep(time.Millisecond)
			}
		})
		t.Run("flush", func(t *testing.T) {
			l, _ := gatedLog(t, db, WithPostedDelay(time.Hour))
			before := l.Stats().Records
			for i := range 3 {
				if err := l.Post(context.Background(), entry(10+i)); err != nil {
					t.Fatal(err)
				}
			}
			recs, err := l.Query(context.Background(), Filter{Actor: "key_a"})
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Stats().Records - before; got != 3 {
				t.Fatalf("%d records committed by the reader's flush, want 3", got)
			}
			if len(recs) < 3 || recs[len(recs)-1].Target != "echo 12" {
				t.Fatalf("query after posting: %d records, last %+v", len(recs), recs[len(recs)-1])
			}
			if err := l.Post(context.Background(), entry(20)); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := l.Stats().Records - before; got != 4 {
				t.Fatalf("%d records committed after Close, want 4", got)
			}
		})
	})
}

// A store that refuses the batch: Begin's record hears of the error (a
// command held for it never starts), a posted record's failure is reported,
// and the log goes on.
func TestBegunAndPostedRecordsHearOfAFailedCommit(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.fresh(t)
			reported := make(chan error, 4)
			l, g := gatedLog(t, db, WithPostedDelay(time.Hour), WithReport(func(err error) { reported <- err }))
			if _, err := l.Append(context.Background(), entry(0)); err != nil {
				t.Fatal(err)
			}
			db.exec(t, poisonSQL[b.name])
			bad := entry(1)
			bad.Action = "poison.record"
			if err := l.Post(context.Background(), bad); err != nil {
				t.Fatal(err)
			}
			p, err := l.Begin(context.Background(), entry(2))
			if err != nil {
				t.Fatal(err)
			}
			fired := make(chan error, 1)
			p.OnDurable(func(err error) { fired <- err })
			if _, err := p.Wait(); err == nil {
				t.Fatal("Wait reported success for a record in a failed batch")
			}
			if err := <-fired; err == nil {
				t.Fatal("OnDurable reported success for a record in a failed batch")
			}
			if err := <-reported; err == nil {
				t.Fatal("nil report")
			}
			if s := g.batchSizes(); fmt.Sprint(s) != "[1 2]" {
				t.Fatalf("batches %v, want [1 2]", s)
			}
			if _, err := l.Append(context.Background(), entry(3)); err != nil {
				t.Fatalf("append after the failed batch: %v", err)
			}
			mustVerify(t, l, 2)
		})
	}
}

// Appends, begun and posted records from many goroutines at once: every
// record is stored once in one chain, nothing waits forever, and every
// begun record is reported durable with the seq it was stored at.
func TestGroupCommitMixedAppends(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l := New(openStore(t, db), db.dir, WithPostedDelay(time.Millisecond))
		const goroutines, per = 32, 6
		var wg sync.WaitGroup
		errs := make(chan error, goroutines*per)
		seqs := make(chan int64, goroutines*per)
		for g := range goroutines {
			wg.Go(func() {
				for i := range per {
					e := entry(g*per + i)
					switch (g + i) % 3 {
					case 0:
						r, err := l.Append(context.Background(), e)
						errs <- err
						seqs <- r.Seq
					case 1:
						p, err := l.Begin(context.Background(), e)
						if err != nil {
							errs <- err
							continue
						}
						seq, err := p.Wait()
						errs <- err
						seqs <- seq
					case 2:
						errs <- l.Post(context.Background(), e)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		close(seqs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		l.Flush()
		stored := storedBySeq(t, l.st)
		if len(stored) != goroutines*per {
			t.Fatalf("%d records stored, want %d", len(stored), goroutines*per)
		}
		seen := map[int64]bool{}
		for s := range seqs {
			if _, ok := stored[s]; !ok || seen[s] {
				t.Fatalf("a caller was given seq %d (stored: %v, seen before: %v)", s, ok, seen[s])
			}
			seen[s] = true
		}
		mustVerify(t, l, goroutines*per)
	})
}
