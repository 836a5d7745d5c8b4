package store_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/store"
)

// TestWALWrittenInPlace: the store opens with its WAL sized ahead
// (walsize.go), and audit commits — through SQLite's automatic checkpoint
// and the WAL's start over — never change the WAL's size: every commit
// overwrites blocks that exist, so its one fdatasync commits no size
// change. 400 appends write more frames (≥ 4 pages each: the record,
// its indexes, the head) than the sized WAL holds, so a WAL that did not
// start over in place would grow. The records are all there after a
// reopen.
func TestWALWrittenInPlace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	wal := filepath.Join(dir, store.FileName+"-wal")
	size := func() int64 {
		t.Helper()
		fi, err := os.Stat(wal)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	sized := size()
	if want := store.WALTarget(4096); sized < want {
		t.Fatalf("WAL of %d bytes after open, want it sized to %d", sized, want)
	}
	db0, err := os.Stat(filepath.Join(dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	l := audit.New(st, dir)
	const n = 400
	for i := range n {
		if _, err := l.Append(ctx, audit.Entry{Actor: "key_a", Role: "agent", Action: "exec.run", Target: "true",
			Sandbox: "sb_1", Verdict: audit.Allow, Detail: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
		if got := size(); got != sized {
			t.Fatalf("append %d: the WAL went from %d to %d bytes: a commit changed its size", i, sized, got)
		}
	}
	db1, err := os.Stat(filepath.Join(dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if db1.Size() <= db0.Size() {
		t.Fatalf("the database file stayed %d bytes: no checkpoint ran, so the WAL never started over", db1.Size())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	l = audit.New(st, dir)
	res, err := l.Verify(ctx)
	if err != nil || !res.OK {
		t.Fatalf("verify after reopen: %+v %v", res, err)
	}
	last, err := st.LastAudit(ctx)
	if err != nil || last.Seq != n {
		t.Fatalf("last record after reopen: %d %v, want %d", last.Seq, err, n)
	}
}

// BenchmarkWALSized measures a lone durable audit append into a WAL sized
// at open ("sized", the store's way) and into one that grows with every
// commit ("growing", SQLite's own until its first checkpoint), alternated
// one append each so that the machine's drift falls on both alike. Each
// round opens two fresh stores and makes perRound appends on each, fewer
// than the first checkpoint takes, so the growing WAL grows throughout.
// Reported: the median latency of each and their ratio.
func BenchmarkWALSized(b *testing.B) {
	const perRound = 150
	ctx := context.Background()
	e := audit.Entry{Actor: "key_a", Role: "agent", ClientAddr: "127.0.0.1", Action: "exec.run", Target: "true",
		Sandbox: "sb_1", Verdict: audit.Allow, Detail: map[string]any{"cmd": "true", "exit": 0}}
	var sized, growing []time.Duration
	open := func(grow bool) (*audit.Log, func()) {
		dir := b.TempDir()
		var st *store.SQLite
		var err error
		if grow {
			st, err = store.OpenSQLiteGrowingWAL(ctx, filepath.Join(dir, store.FileName))
		} else {
			st, err = store.Open(ctx, dir)
		}
		if err != nil {
			b.Fatal(err)
		}
		l := audit.New(st, dir)
		return l, func() { _ = l.Close(); _ = st.Close() }
	}
	timed := func(l *audit.Log) time.Duration {
		t0 := time.Now()
		if _, err := l.Append(ctx, e); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for n := 0; n < b.N; {
		ls, closeS := open(false)
		lg, closeG := open(true)
		for i := 0; i < perRound && n < b.N; i, n = i+1, n+1 {
			if i%2 == 0 {
				sized, growing = append(sized, timed(ls)), append(growing, timed(lg))
			} else {
				growing, sized = append(growing, timed(lg)), append(sized, timed(ls))
			}
		}
		closeS()
		closeG()
	}
	slices.Sort(sized)
	slices.Sort(growing)
	ps, pg := sized[len(sized)/2], growing[len(growing)/2]
	b.ReportMetric(float64(ps.Microseconds()), "sized-p50-µs")
	b.ReportMetric(float64(pg.Microseconds()), "growing-p50-µs")
	b.ReportMetric(float64(pg)/float64(ps), "growing/sized")
}
