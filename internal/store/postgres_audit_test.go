package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/store"
	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// node is one sandhold node's view of the shared database: its own
// connection pool and its own audit.Log (each with a different data dir, so
// a head file could not be shared even if one were written).
type node struct {
	st  *store.Postgres
	log *audit.Log
}

func openNodes(t testing.TB, url string, n int) []node {
	t.Helper()
	var out []node
	for range n {
		st, err := store.OpenPostgres(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		out = append(out, node{st: st, log: audit.New(st, t.TempDir())})
	}
	return out
}

func appendAudit(t testing.TB, l *audit.Log, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.Append(context.Background(), audit.Entry{Actor: "key_a", Action: "exec.run", Target: fmt.Sprint(i),
			Verdict: audit.Allow, Detail: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
}

func rawExec(t *testing.T, url, q string) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	if _, err := c.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Three nodes append at once; the result is one chain that every node
// verifies, with the head in the database.
func TestPostgresAuditOneChainAcrossNodes(t *testing.T) {
	url := pgtest.URL(t)
	nodes := openNodes(t, url, 3)
	const per = 30
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); appendAudit(t, n.log, per) }()
	}
	wg.Wait()
	for i, n := range nodes {
		res, err := n.log.Verify(context.Background())
		if err != nil || !res.OK || res.Records != 3*per || res.HeadSeq != 3*per {
			t.Fatalf("node %d verify = %+v %v", i, res, err)
		}
	}
	h, ok, err := nodes[0].st.AuditHead(context.Background())
	last, _ := nodes[1].st.LastAudit(context.Background())
	if err != nil || !ok || h.Seq != 3*per || h.Hash != last.Hash {
		t.Fatalf("head = %+v ok=%v err=%v, last = %d %s", h, ok, err, last.Seq, last.Hash)
	}
	if nodes[0].log.HeadPath() != "" {
		t.Fatalf("a PostgreSQL log names a head file: %q", nodes[0].log.HeadPath())
	}
}

// Three nodes, each with 16 callers at once: every node groups its own
// callers' appends, the nodes' batches are serialised by the head row, and
// the result is still one chain with every record once.
func TestPostgresAuditGroupCommitAcrossNodes(t *testing.T) {
	url := pgtest.URL(t)
	nodes := openNodes(t, url, 3)
	const callers, per = 16, 5
	var wg sync.WaitGroup
	seqs := make(chan int64, 3*callers*per)
	for _, n := range nodes {
		for c := range callers {
			wg.Go(func() {
				for i := range per {
					r, err := n.log.Append(context.Background(), audit.Entry{Actor: "key_a", Action: "exec.run",
						Target: fmt.Sprint(c, "/", i), Verdict: audit.Allow})
					if err != nil {
						t.Error(err)
						return
					}
					seqs <- r.Seq
				}
			})
		}
	}
	wg.Wait()
	close(seqs)
	seen := map[int64]bool{}
	for s := range seqs {
		if seen[s] {
			t.Fatalf("seq %d returned twice", s)
		}
		seen[s] = true
	}
	const total = 3 * callers * per
	if len(seen) != total {
		t.Fatalf("%d appends returned, want %d", len(seen), total)
	}
	var batches int64
	for i, n := range nodes {
		res, err := n.log.Verify(context.Background())
		if err != nil || !res.OK || res.Records != total || res.HeadSeq != total {
			t.Fatalf("node %d verify = %+v %v", i, res, err)
		}
		batches += n.log.Stats().Batches
	}
	t.Logf("%d appends from 3 nodes in %d transactions", total, batches)
}

func TestPostgresAuditVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name     string
		tamper   []string
		appendAf int // records appended after the tampering, by a node
		wantBad  int64
		problem  string
	}{
		{"edited record", []string{`UPDATE audit SET target = 'x' WHERE seq = 4`}, 0, 4, "modified"},
		{"deleted record", []string{`DELETE FROM audit WHERE seq = 4`}, 0, 4, "missing"},
		{"deleted newest records", []string{`DELETE FROM audit WHERE seq >= 9`}, 0, 9, "truncated"},
		{"deleted newest records, then more appended", []string{`DELETE FROM audit WHERE seq >= 9`}, 3, 10, "does not match"},
		{"head row deleted", []string{`DELETE FROM audit_head`}, 0, 10, "missing"},
		{"head row deleted, then more appended", []string{`DELETE FROM audit_head`}, 2, 12, "missing"},
		{"head row reset", []string{`UPDATE audit_head SET seq = 0, hash = ''`}, 0, 10, "missing"},
		{"head hash changed", []string{`UPDATE audit_head SET hash = repeat('0', 64)`}, 0, 10, "does not match"},
		{"head malformed", []string{`UPDATE audit_head SET hash = 'x'`}, 0, 10, "malformed"},
		{"head moved past the end", []string{`UPDATE audit_head SET seq = 12`}, 0, 11, "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := pgtest.URL(t)
			nodes := openNodes(t, url, 2)
			appendAudit(t, nodes[0].log, 10)
			if res, err := nodes[1].log.Verify(context.Background()); err != nil || !res.OK {
				t.Fatalf("before tampering: %+v %v", res, err)
			}
			for _, q := range tc.tamper {
				rawExec(t, url, q)
			}
			appendAudit(t, nodes[1].log, tc.appendAf)
			for i, n := range nodes {
				res, err := n.log.Verify(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if res.OK || (tc.wantBad != 0 && res.FirstBad != tc.wantBad) || !strings.Contains(res.Problem, tc.problem) {
					t.Fatalf("node %d: verify = %+v; want not OK at %d (%q)", i, res, tc.wantBad, tc.problem)
				}
			}
		})
	}
}

// BenchmarkPostgresAuditAppend is the cost of one audit append through the
// real audit.Log (hashing included), alone and with three nodes (separate
// connection pools) appending at once; ns/op is per append.
func BenchmarkPostgresAuditAppend(b *testing.B) {
	for _, writers := range []int{1, 3} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			nodes := openNodes(b, pgtest.URL(b), writers)
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N / writers
			for i, n := range nodes {
				cnt := per
				if i == 0 {
					cnt += b.N % writers
				}
				wg.Add(1)
				go func() { defer wg.Done(); appendAudit(b, n.log, cnt) }()
			}
			wg.Wait()
			b.StopTimer()
			if res, err := nodes[0].log.Verify(context.Background()); err != nil || !res.OK {
				b.Fatalf("verify: %+v %v", res, err)
			}
		})
	}
}

func BenchmarkSQLiteAuditAppend(b *testing.B) {
	dir := b.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	l := audit.New(st, dir)
	b.ResetTimer()
	appendAudit(b, l, b.N)
}
