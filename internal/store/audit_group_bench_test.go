package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// appenderCounts are the concurrent appenders each mode is measured with.
var appenderCounts = []int{1, 4, 16, 64}

// runAppenders appends b.N records through l from n goroutines and
// reports appends/s, the median and 99th-percentile latency of one Append,
// and the records per transaction.
func runAppenders(b *testing.B, l *audit.Log, n int) {
	b.Helper()
	e := audit.Entry{Actor: "key_a", Role: "agent", ClientAddr: "127.0.0.1", Action: "exec.run", Target: "true",
		Sandbox: "sb_1", Verdict: audit.Allow, Detail: map[string]any{"cmd": "true", "exit": 0}}
	lat := make([][]time.Duration, n)
	before := l.Stats()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range n {
		cnt := b.N / n
		if g == 0 {
			cnt += b.N % n
		}
		wg.Go(func() {
			for range cnt {
				t0 := time.Now()
				if _, err := l.Append(context.Background(), e); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	after := l.Stats()
	batches := after.Batches - before.Batches
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(after.Records-before.Records)/float64(max(batches, 1)), "records/batch")
	res, err := l.Verify(context.Background())
	if err != nil || !res.OK {
		b.Fatalf("verify: %+v %v", res, err)
	}
}

// BenchmarkAuditGroupCommitSQLite: the audit append through audit.Log on
// the embedded store. Modes: "old" is the previous path (synchronous=NORMAL,
// no fsync per commit, one append per transaction); "serial" is durable
// (FULL) one append per transaction; "group" is durable with group commit.
// fsyncs per batch are counted from outside (strace -f -c -e fsync, see
// BENCHMARKS.md).
func BenchmarkAuditGroupCommitSQLite(b *testing.B) {
	modes := []struct {
		name string
		sync string
		opts []audit.Option
	}{
		{"old", "NORMAL", []audit.Option{audit.WithGroupCommit(1, 1)}},
		{"serial", "FULL", []audit.Option{audit.WithGroupCommit(1, 1)}},
		{"group", "FULL", nil},
	}
	for _, m := range modes {
		for _, n := range appenderCounts {
			b.Run(fmt.Sprintf("%s/appenders=%d", m.name, n), func(b *testing.B) {
				dir := b.TempDir()
				st, err := store.OpenSQLiteSync(context.Background(), filepath.Join(dir, store.FileName), m.sync)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = st.Close() }()
				runAppenders(b, audit.New(st, dir, m.opts...), n)
			})
		}
	}
}

// BenchmarkAuditGroupCommitPostgres: the same against a PostgreSQL server
// with its flushes on (the tests' shared server runs with fsync=off), one
// node. "serial" is one append per transaction (the old path; the inserts
// and the head's move now share a round trip), "group" is group commit.
// fsyncs/batch is the server's WAL syncs (pg_stat_wal) per transaction.
func BenchmarkAuditGroupCommitPostgres(b *testing.B) {
	bin, err := pgtest.FindBinDir()
	if err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	srv, err := pgtest.Start(ctx, bin, pgtest.Durable())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	for _, m := range []struct {
		name string
		opts []audit.Option
	}{
		{"serial", []audit.Option{audit.WithGroupCommit(1, 1)}},
		{"group", nil},
	} {
		for _, n := range appenderCounts {
			b.Run(fmt.Sprintf("%s/appenders=%d", m.name, n), func(b *testing.B) {
				url, err := srv.NewDatabase(ctx)
				if err != nil {
					b.Fatal(err)
				}
				st, err := store.OpenPostgres(ctx, url)
				if err != nil {
					b.Fatal(err)
				}
				l := audit.New(st, b.TempDir(), m.opts...)
				resetWAL(b, url)
				before := l.Stats()
				runAppenders(b, l, n)
				batches := l.Stats().Batches - before.Batches
				_ = st.Close()
				if syncs := walSyncs(b, url); batches > 0 {
					b.ReportMetric(float64(syncs)/float64(batches), "fsyncs/batch")
				}
			})
		}
	}
}

func resetWAL(b *testing.B, url string) {
	b.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	if _, err := c.Exec(context.Background(), `SELECT pg_stat_reset_shared('wal')`); err != nil {
		b.Fatal(err)
	}
}

// walSyncs reads the server's WAL syncs since resetWAL, once the
// benchmark's connections are gone (a backend reports its counts when it
// exits; waited for, bounded).
func walSyncs(b *testing.B, url string) int64 {
	b.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	for range 200 {
		var others int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			b.Fatal(err)
		}
		if others == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n int64
	if err := c.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
