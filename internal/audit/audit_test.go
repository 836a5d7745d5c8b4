package audit

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

func newLog(t *testing.T) (*Log, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return New(st, dir), dir
}

func fill(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := l.Append(context.Background(), Entry{
			Actor: "key_a", Role: "admin", ClientAddr: "127.0.0.1", Action: []string{"auth.success", "key.create", "exec.run"}[i%3],
			Target: "t", Verdict: Allow, Detail: map[string]any{"i": i, "cmd": "echo GITHUB_TOKEN=abc"},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func rawDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.FileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestAppendChainsAndRedacts(t *testing.T) {
	l, dir := newLog(t)
	fill(t, l, 5)
	recs, err := l.Query(context.Background(), Filter{})
	if err != nil || len(recs) != 5 {
		t.Fatalf("query: %d %v", len(recs), err)
	}
	if recs[0].PrevHash != GenesisHash {
		t.Errorf("first prev = %s", recs[0].PrevHash)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].PrevHash != recs[i-1].Hash || recs[i].Seq != recs[i-1].Seq+1 {
			t.Errorf("record %d not chained", recs[i].Seq)
		}
	}
	if s := recs[0].Detail["cmd"].(string); strings.Contains(s, "abc") {
		t.Errorf("secret stored: %q", s)
	}
	b, err := os.ReadFile(filepath.Join(dir, HeadFile))
	if err != nil || string(b) != fmt.Sprintf("%020d %s\n", 5, recs[4].Hash) {
		t.Errorf("head = %q %v", b, err)
	}
	res, err := l.Verify(context.Background())
	if err != nil || !res.OK || res.Records != 5 || res.HeadSeq != 5 {
		t.Fatalf("verify = %+v %v", res, err)
	}
	got, _ := l.Query(context.Background(), Filter{Action: "auth"})
	if len(got) != 2 {
		t.Errorf("prefix query got %d", len(got))
	}
}

func TestVerifyEmpty(t *testing.T) {
	l, _ := newLog(t)
	res, err := l.Verify(context.Background())
	if err != nil || !res.OK || res.Records != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name     string
		tamper   func(t *testing.T, db *sql.DB, dir string)
		firstBad int64
	}{
		{"edit field", func(t *testing.T, db *sql.DB, _ string) {
			mustExec(t, db, `UPDATE audit SET verdict='deny' WHERE seq=4`)
		}, 4},
		{"edit detail", func(t *testing.T, db *sql.DB, _ string) {
			mustExec(t, db, `UPDATE audit SET detail='{"i":99}' WHERE seq=2`)
		}, 2},
		{"edit and rehash one record", func(t *testing.T, db *sql.DB, _ string) {
			// The forger recomputes record 3's hash but cannot fix 4's link.
			rehash(t, db, 3, `UPDATE audit SET actor='key_evil' WHERE seq=3`)
		}, 4},
		{"delete middle", func(t *testing.T, db *sql.DB, _ string) {
			mustExec(t, db, `DELETE FROM audit WHERE seq=3`)
		}, 3},
		{"delete first", func(t *testing.T, db *sql.DB, _ string) {
			mustExec(t, db, `DELETE FROM audit WHERE seq=1`)
		}, 1},
		{"reorder (swap seq)", func(t *testing.T, db *sql.DB, _ string) {
			mustExec(t, db, `UPDATE audit SET seq=-1 WHERE seq=2`)
			mustExec(t, db, `UPDATE audit SET seq=2 WHERE seq=3`)
			mustExec(t, db, `UPDATE audit SET seq=3 WHERE seq=-1`)
		}, 2},
		{"truncate tail", func(t *testing.T, db *sql.DB, _ string) {
			mustExec(t, db, `DELETE FROM audit WHERE seq>=5`)
		}, 5},
		{"truncate all", func(t *testing.T, db *sql.DB, _ string) {
			mustExec(t, db, `DELETE FROM audit`)
		}, 1},
		{"head file removed", func(t *testing.T, _ *sql.DB, dir string) {
			if err := os.Remove(filepath.Join(dir, HeadFile)); err != nil {
				t.Fatal(err)
			}
		}, 6},
		{"head file edited", func(t *testing.T, _ *sql.DB, dir string) {
			if err := os.WriteFile(filepath.Join(dir, HeadFile), []byte("6 "+strings.Repeat("a", 64)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 6},
		{"head file garbage", func(t *testing.T, _ *sql.DB, dir string) {
			if err := os.WriteFile(filepath.Join(dir, HeadFile), []byte("nonsense"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, dir := newLog(t)
			fill(t, l, 6)
			tc.tamper(t, rawDB(t, dir), dir)
			res, err := l.Verify(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.FirstBad != tc.firstBad || res.Problem == "" {
				t.Fatalf("verify = %+v, want first bad %d", res, tc.firstBad)
			}
		})
	}
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func rehash(t *testing.T, db *sql.DB, seq int64, update string) {
	t.Helper()
	mustExec(t, db, update)
	var r store.AuditRecord
	var ns int64
	err := db.QueryRow(`SELECT seq, time_ns, actor, role, client_addr, action, target, sandbox, verdict, detail, prev_hash FROM audit WHERE seq=?`, seq).
		Scan(&r.Seq, &ns, &r.Actor, &r.Role, &r.ClientAddr, &r.Action, &r.Target, &r.Sandbox, &r.Verdict, &r.Detail, &r.PrevHash)
	if err != nil {
		t.Fatal(err)
	}
	r.Time = time.Unix(0, ns).UTC()
	h, err := HashOf(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit SET hash=? WHERE seq=?`, h, seq); err != nil {
		t.Fatal(err)
	}
}

func TestHashIsCanonical(t *testing.T) {
	r := store.AuditRecord{Seq: 1, Time: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), Action: "a.b", Detail: []byte(`{"a":1}`), PrevHash: GenesisHash}
	h1, err := HashOf(r)
	if err != nil {
		t.Fatal(err)
	}
	// Same instant in another zone hashes the same; any field change does not.
	r2 := r
	r2.Time = r.Time.In(time.FixedZone("x", 3600))
	if h2, _ := HashOf(r2); h2 != h1 {
		t.Errorf("zone changed the hash")
	}
	r3 := r
	r3.Target = "x"
	if h3, _ := HashOf(r3); h3 == h1 {
		t.Errorf("target not covered by the hash")
	}
	// Golden value: changing the encoding breaks every existing log.
	const golden = "52992c16730bf116c8046795496157799410bab24a8f2b02e90316e6eaa675d7"
	if h1 != golden {
		t.Errorf("canonical hash changed: %s", h1)
	}
}

func TestFieldCaps(t *testing.T) {
	l, _ := newLog(t)
	big := strings.Repeat("x", 10*maxFieldLen)
	r, err := l.Append(context.Background(), Entry{Action: "a.b", Target: big, Detail: map[string]any{"blob": strings.Repeat("y", 2*maxDetailLen)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Target) > maxFieldLen+4 {
		t.Errorf("target len %d", len(r.Target))
	}
	if r.Detail["truncated"] != true {
		t.Errorf("detail not truncated: %v", len(r.Detail))
	}
	if _, err := l.Append(context.Background(), Entry{}); err == nil {
		t.Errorf("empty action accepted")
	}
}

func TestAppendAfterTruncationDoesNotHideIt(t *testing.T) {
	l, dir := newLog(t)
	fill(t, l, 6)
	mustExec(t, rawDB(t, dir), `DELETE FROM audit WHERE seq>=5`)
	// Later appends (a restarted server) reuse seqs 5 and 6 ...
	fill(t, l, 3)
	res, err := l.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// ... but the head still names the original record 6.
	if res.OK || res.FirstBad != 6 {
		t.Fatalf("verify = %+v", res)
	}
}

func TestAppendWithMissingHeadDoesNotHideIt(t *testing.T) {
	l, dir := newLog(t)
	fill(t, l, 3)
	if err := os.Remove(filepath.Join(dir, HeadFile)); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 2)
	res, err := l.Verify(context.Background())
	if err != nil || res.OK {
		t.Fatalf("verify = %+v %v", res, err)
	}
}
