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
	// Each node's data dir anchors the part of the chain it saw: its
	// head file names a stored record, at most the last.
	for i, n := range nodes {
		res, _ := n.log.Verify(context.Background())
		if f := res.Anchors[1]; f.State != audit.AnchorAgrees || f.Seq < per || f.Seq > 3*per {
			t.Fatalf("node %d's head file = %+v, want one of its records", i, f)
		}
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

// unguard lets the database's owner change audit_head as an attacker with
// its rights would: the guard triggers first.
const unguard = `ALTER TABLE audit_head DISABLE TRIGGER USER`

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
		{"head row deleted", []string{unguard, `DELETE FROM audit_head`}, 0, 10, "audit_head) is missing"},
		{"head row deleted, then more appended", []string{unguard, `DELETE FROM audit_head`}, 2, 12, "audit_head) is missing"},
		{"head row reset", []string{unguard, `UPDATE audit_head SET seq = 0, hash = ''`}, 0, 1, "reset to an empty chain"},
		{"head hash changed", []string{`UPDATE audit_head SET hash = repeat('0', 64)`}, 0, 10, "does not match"},
		{"head malformed", []string{`UPDATE audit_head SET hash = 'x'`}, 0, 10, "malformed"},
		{"head moved past the end", []string{`UPDATE audit_head SET seq = 12`}, 0, 11, "truncated"},
		// Issue 38: emptying the log and its head row passed verify.
		{"records emptied", []string{`DELETE FROM audit`}, 0, 1, "store's anchor (audit_head) names record 10"},
		{"records emptied, head row deleted", []string{`DELETE FROM audit`, unguard, `DELETE FROM audit_head`}, 0, 1, "audit_head) is missing"},
		{"records emptied, head row reset", []string{`DELETE FROM audit`, unguard, `UPDATE audit_head SET seq = 0, hash = ''`}, 0, 1, "the head file names record"},
		{"records emptied, head row reset, then more appended", []string{`DELETE FROM audit`, unguard, `UPDATE audit_head SET seq = 0, hash = ''`}, 2, 3, "the head file names record 10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := pgtest.URL(t)
			nodes := openNodes(t, url, 2)
			// Both nodes append, so each data dir anchors the chain
			// (node 0 up to 5, node 1 up to 10).
			appendAudit(t, nodes[0].log, 5)
			appendAudit(t, nodes[1].log, 5)
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
				if res.OK || (tc.wantBad != 0 && i == 1 && res.FirstBad != tc.wantBad) || (i == 1 && !strings.Contains(res.Problem, tc.problem)) {
					t.Fatalf("node %d: verify = %+v; want not OK at %d (%q)", i, res, tc.wantBad, tc.problem)
				}
			}
		})
	}
}

// The guard: the head row cannot be deleted, truncated or moved back by a
// plain statement, even by its owner (who must disable the triggers first,
// which TestPostgresAnchorGuardedRole keeps from the application's role).
func TestPostgresAuditHeadTriggers(t *testing.T) {
	url := pgtest.URL(t)
	nodes := openNodes(t, url, 1)
	appendAudit(t, nodes[0].log, 3)
	for _, q := range []string{`DELETE FROM audit_head`, `TRUNCATE audit_head`, `UPDATE audit_head SET seq = 2`, `UPDATE audit_head SET seq = 0, hash = ''`} {
		c, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(context.Background(), q)
		_ = c.Close(context.Background())
		if err == nil || !strings.Contains(err.Error(), "never deleted or moved back") {
			t.Fatalf("%s: %v, want the guard's refusal", q, err)
		}
	}
	mustVerifyPG(t, nodes[0].log, 3)
}

func mustVerifyPG(t *testing.T, l *audit.Log, n int64) {
	t.Helper()
	if res, err := l.Verify(context.Background()); err != nil || !res.OK || res.Records != n {
		t.Fatalf("verify = %+v %v, want OK with %d", res, err, n)
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

// Issue 38: with the application's role kept from audit_head
// (PostgresAnchorGuard), that role cannot delete, truncate, rewind or
// unguard the store's anchor at all, so emptying the records is reported
// whatever it does; and the guard says it holds.
func TestPostgresAnchorGuardedRole(t *testing.T) {
	app, admin := pgtest.RoleURLs(t)
	nodes := openNodes(t, app, 1) // the app role runs the migrations
	appendAudit(t, nodes[0].log, 4)
	if g, err := nodes[0].st.AuditHeadGuard(context.Background()); err != nil || g.Guarded {
		t.Fatalf("guard before the statements = %+v (%v), want not guarded (the role owns the table)", g, err)
	}
	rawExec(t, admin, store.PostgresAnchorGuard(appRole(t, app)))
	g, err := nodes[0].st.AuditHeadGuard(context.Background())
	if err != nil || !g.Guarded {
		t.Fatalf("guard after the statements = %+v (%v)", g, err)
	}
	// The application's role can still append (read, lock, move on).
	appendAudit(t, nodes[0].log, 2)
	mustVerifyPG(t, nodes[0].log, 6)
	for _, q := range []string{
		`DELETE FROM audit_head`, `TRUNCATE audit_head`, `UPDATE audit_head SET seq = 0, hash = ''`,
		`ALTER TABLE audit_head DISABLE TRIGGER USER`, `DROP TABLE audit_head`, `DROP FUNCTION audit_head_guard() CASCADE`,
		`CREATE OR REPLACE FUNCTION audit_head_guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`,
		`ALTER TABLE audit_head OWNER TO CURRENT_USER`, `GRANT sandhold_anchor TO CURRENT_USER`,
		`DROP SCHEMA public CASCADE`, `CREATE SCHEMA shadow`, // a schema of its own could shadow audit_head
	} {
		c, err := pgx.Connect(context.Background(), app)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(context.Background(), q)
		_ = c.Close(context.Background())
		if err == nil {
			t.Fatalf("the application's role ran %s", q)
		}
	}
	// What it can do: empty the records. Verify names the anchor.
	rawExec(t, app, `DELETE FROM audit`)
	res, err := nodes[0].log.Verify(context.Background())
	if err != nil || res.OK || res.FirstBad != 1 || !strings.Contains(res.Problem, "audit_head) names record 6") {
		t.Fatalf("verify after emptying = %+v (%v)", res, err)
	}
}

// appRole is the user name of a postgres:// URL.
func appRole(t *testing.T, u string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.User
}
