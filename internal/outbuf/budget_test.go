package outbuf

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// fill writes n bytes of c to o and closes it.
func fill(t *testing.T, o *Output, c byte, n int, close bool) {
	t.Helper()
	if _, err := o.Write(bytes.Repeat([]byte{c}, n)); err != nil {
		t.Fatal(err)
	}
	if close {
		o.Close()
	}
}

func TestBudgetEvictsTheAccountsOldestFinishedFirst(t *testing.T) {
	b := NewBudget(1<<20, 3000)
	a1 := b.NewOutput("a", 2000)
	fill(t, a1, 'x', 1000, true)
	other := b.NewOutput("b", 2000)
	fill(t, other, 'o', 1000, true)
	a2 := b.NewOutput("a", 2000)
	fill(t, a2, 'y', 1000, true)
	// A third 1000 bytes of a's fits its 3000; a fourth does not: a1,
	// its oldest finished, goes; b's is not a's to give.
	a3 := b.NewOutput("a", 2000)
	fill(t, a3, 'z', 1000, true)
	if a1.Evicted() {
		t.Fatal("evicted before a's share was full")
	}
	a4 := b.NewOutput("a", 2000)
	fill(t, a4, 'w', 1000, false)
	if !a1.Evicted() || a2.Evicted() || a3.Evicted() || other.Evicted() {
		t.Fatalf("evicted a1 %v a2 %v a3 %v b %v; want a1 alone", a1.Evicted(), a2.Evicted(), a3.Evicted(), other.Evicted())
	}
	if _, ofA := b.Used("a"); ofA > 3000 {
		t.Fatalf("a holds %d bytes, over its 3000", ofA)
	}
	if got, _ := a1.Text(); got != EvictedText {
		t.Fatalf("evicted text %q", got)
	}
	if data, next, _ := a1.ReadAt(0, 100); len(data) != 0 || next != 0 || a1.Total() != 1000 {
		t.Fatalf("evicted ReadAt = %q, %d (total %d)", data, next, a1.Total())
	}
	if got, _ := other.Text(); got != strings.Repeat("o", 1000) {
		t.Fatal("b's output changed")
	}
}

func TestBudgetTotalEvictsAnyonesOldest(t *testing.T) {
	b := NewBudget(2500, 0)
	first := b.NewOutput("a", 2000)
	fill(t, first, 'x', 1000, true)
	second := b.NewOutput("b", 2000)
	fill(t, second, 'y', 1000, true)
	third := b.NewOutput("c", 2000)
	fill(t, third, 'z', 1000, false)
	if !first.Evicted() || second.Evicted() {
		t.Fatalf("evicted first %v second %v; want the oldest only", first.Evicted(), second.Evicted())
	}
	if total, _ := b.Used("c"); total > 2500 {
		t.Fatalf("%d bytes kept, over 2500", total)
	}
	if b.Evictions() != 1 {
		t.Fatalf("%d evictions, want 1", b.Evictions())
	}
}

// TestBudgetSqueezesARunningStream: with nothing finished to evict, a
// running stream stops growing, keeps its head and a smaller ring of the
// latest bytes, and counts the rest as dropped.
func TestBudgetSqueezesARunningStream(t *testing.T) {
	b := NewBudget(0, 1000)
	o := b.NewOutput("a", 10000)
	for i := range 50 {
		fill(t, o, byte('a'+i%26), 100, false)
	}
	if _, used := b.Used("a"); used > 1000 {
		t.Fatalf("%d bytes kept, over 1000", used)
	}
	text, truncated := o.Text()
	if !truncated || o.Total() != 5000 || !strings.HasPrefix(text, strings.Repeat("a", 100)) || !strings.HasSuffix(text, strings.Repeat("x", 100)) {
		t.Fatalf("squeezed text %v %q", truncated, text)
	}
	o.Close()
	if o.Evicted() {
		t.Fatal("closing evicted the stream itself")
	}
}

func TestBudgetReleaseAndCollectGiveBytesBack(t *testing.T) {
	b := NewBudget(0, 0)
	o := b.NewOutput("a", 4000)
	fill(t, o, 'x', 3000, true)
	if _, used := b.Used("a"); used != 3000 {
		t.Fatalf("closed stream charges %d, want exactly its 3000 bytes", used)
	}
	o.Release()
	if total, _ := b.Used("a"); total != 0 {
		t.Fatalf("%d bytes charged after Release", total)
	}
	if got, _ := o.Text(); got != strings.Repeat("x", 3000) {
		t.Fatal("Release emptied the stream")
	}
	// Forgotten without Release: the collector's cleanup gives it back.
	func() {
		lost := b.NewOutput("a", 4000)
		fill(t, lost, 'y', 2000, false)
	}()
	for i := 0; ; i++ {
		runtime.GC()
		if total, _ := b.Used("a"); total == 0 {
			break
		}
		if i == 1000 {
			t.Fatal("a forgotten stream's bytes were never given back")
		}
		runtime.Gosched()
	}
}

// TestBudgetNeverOverspends: random writes, closes and releases over
// several accounts never keep more than the budget allows, and every
// stream that was not evicted still reads as an unbudgeted one would.
func TestBudgetNeverOverspends(t *testing.T) {
	const total, per = 20000, 6000
	b := NewBudget(total, per)
	rng := rand.New(rand.NewPCG(3, 4)) //nolint:gosec // G404: fixed seed, the same run every time
	type stream struct {
		out, ref *Output
		open     bool
	}
	var all []*stream
	accounts := []string{"a", "b", "c", "d"}
	for range 3000 {
		switch op := rng.IntN(10); {
		case op < 2 || len(all) == 0:
			limit := 100 + rng.IntN(5000)
			all = append(all, &stream{out: b.NewOutput(accounts[rng.IntN(len(accounts))], limit), ref: NewOutput(limit), open: true})
		case op < 8:
			s := all[rng.IntN(len(all))]
			if s.open {
				p := bytes.Repeat([]byte{"abcdefghijklmnopqrstuvwxyz"[rng.IntN(26)]}, rng.IntN(700))
				_, _ = s.out.Write(p)
				_, _ = s.ref.Write(p)
			}
		case op < 9:
			s := all[rng.IntN(len(all))]
			s.out.Close()
			s.open = false
		default:
			all[rng.IntN(len(all))].out.Release()
		}
		for _, a := range accounts {
			if t2, ofA := b.Used(a); t2 > total || ofA > per {
				t.Fatalf("kept %d in all, %d for %s: over %d / %d", t2, ofA, a, total, per)
			}
		}
	}
	for i, s := range all {
		if s.out.Evicted() || s.out.Total() != s.ref.Total() {
			continue
		}
		got, _ := s.out.Text()
		want, _ := s.ref.Text()
		if !s.out.Truncated() && got != want {
			t.Fatalf("stream %d reads %q, an unbudgeted one %q", i, got, want)
		}
	}
}

// TestBudgetConcurrentUse: writers, closers and readers of streams that
// evict each other, at once (run with -race; a lock-order mistake hangs).
func TestBudgetConcurrentUse(t *testing.T) {
	b := NewBudget(50000, 20000)
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			acct := string(rune('a' + g%3))
			var prev *Output
			for i := range 300 {
				o := b.NewOutput(acct, 4000)
				_, _ = o.Write(bytes.Repeat([]byte{'x'}, 100+i%3000))
				if prev != nil {
					_, _, _ = prev.ReadAt(0, 100)
					_, _ = prev.Text()
				}
				o.Close()
				prev = o
			}
		}()
	}
	for range 8 {
		<-done
	}
	if total, _ := b.Used("a"); total > 50000 {
		t.Fatalf("%d kept, over 50000", total)
	}
}

// TestGoneAnswersReadsOfEvictedBytes: a read of an evicted stream below
// its end is a gone fault naming the stream and the command; a read at its
// end, or of a stream that was not evicted, is not.
func TestGoneAnswersReadsOfEvictedBytes(t *testing.T) {
	b := NewBudget(1<<20, 1500)
	old := b.NewOutput("a", 2000)
	fill(t, old, 'x', 1000, true)
	kept := b.NewOutput("a", 2000)
	fill(t, kept, 'y', 1000, true)
	if !old.Evicted() || kept.Evicted() {
		t.Fatalf("evicted old %v kept %v; want old alone", old.Evicted(), kept.Evicted())
	}
	err := old.Gone("stdout", "c1", 0)
	if !fault.Is(err, fault.Gone) || !strings.Contains(err.Error(), "stdout of command c1") {
		t.Fatalf("a read of evicted bytes: %v", err)
	}
	if err := old.Gone("stdout", "c1", 1000); err != nil {
		t.Fatalf("a read at the end of an evicted stream: %v", err)
	}
	if err := kept.Gone("stderr", "c2", 0); err != nil {
		t.Fatalf("a read of a kept stream: %v", err)
	}
}
