package audit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 38: `DELETE FROM audit` plus removing the head (the head file on
// SQLite, the audit_head row on PostgreSQL) passed verify as an intact chain
// of 0 records. The chain's head is now anchored in both places on both
// stores; emptying the records with either anchor removed still fails, and
// names the anchor that disagrees.
func TestEmptiedLogFailsVerify(t *testing.T) {
	// unguard drops the store anchor's guard as someone with the
	// database's full rights could (on PostgreSQL the table's owner; see
	// store.PostgresAnchorGuard for a role that cannot).
	unguard := map[string]string{
		"sqlite":   `DROP TRIGGER audit_head_keep; DROP TRIGGER audit_head_forward`,
		"postgres": `ALTER TABLE audit_head DISABLE TRIGGER USER`,
	}
	tests := []struct {
		name     string
		sql      []string // "unguard" stands for the back end's statement
		rmFile   bool
		ok       bool
		problem  string
		firstBad int64
	}{
		{"records deleted", []string{`DELETE FROM audit`}, false, false, "records 1..6 are missing (log truncated): the store's anchor (audit_head) names record 6", 1},
		{"records deleted, head file removed", []string{`DELETE FROM audit`}, true, false, "the store's anchor (audit_head) names record 6", 1},
		{"records deleted, head row deleted", []string{`DELETE FROM audit`, "unguard", `DELETE FROM audit_head`}, false, false, "the store's anchor (audit_head) is missing", 1},
		{"records deleted, head row reset", []string{`DELETE FROM audit`, "unguard", `UPDATE audit_head SET seq = 0, hash = ''`}, false, false, "the head file names record 6", 1},
		{"records deleted, head row deleted, head file removed", []string{`DELETE FROM audit`, "unguard", `DELETE FROM audit_head`}, true, false, "the store's anchor (audit_head) is missing", 1},
		// What someone who can rewrite both the database (and its
		// guard) and the data dir can still do: make a fresh, empty
		// log. SECURITY.md says so; ship records off-host against it.
		{"both anchors reset to an empty chain", []string{`DELETE FROM audit`, "unguard", `UPDATE audit_head SET seq = 0, hash = ''`}, true, true, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, db testDB) {
				l := New(openStore(t, db), db.dir)
				for i := range 6 {
					if _, err := l.Append(context.Background(), entry(i)); err != nil {
						t.Fatal(err)
					}
				}
				mustVerify(t, l, 6)
				backend := "sqlite"
				if l.shared {
					backend = "postgres"
				}
				for _, q := range tc.sql {
					if q == "unguard" {
						q = unguard[backend]
					}
					db.exec(t, q)
				}
				if tc.rmFile {
					if err := os.Remove(filepath.Join(db.dir, HeadFile)); err != nil {
						t.Fatal(err)
					}
				}
				res, err := l.Verify(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if res.OK != tc.ok || !strings.Contains(res.Problem, tc.problem) || res.FirstBad != tc.firstBad {
					t.Fatalf("verify = %+v, want ok=%v first bad %d (%q)", res, tc.ok, tc.firstBad, tc.problem)
				}
			})
		})
	}
}

// The store's anchor refuses a plain DELETE or a move back on both stores
// (the triggers); with them in place emptying the log needs more than SQL
// against the records.
func TestStoreAnchorRefusesDeleteAndRewind(t *testing.T) {
	for _, q := range []string{`DELETE FROM audit_head`, `UPDATE audit_head SET seq = 0, hash = ''`, `UPDATE audit_head SET seq = 1`} {
		t.Run(q, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, db testDB) {
				l := New(openStore(t, db), db.dir)
				for i := range 3 {
					if _, err := l.Append(context.Background(), entry(i)); err != nil {
						t.Fatal(err)
					}
				}
				if err := db.try(q); err == nil || !strings.Contains(err.Error(), "audit head") {
					t.Fatalf("%s: %v, want the trigger's refusal", q, err)
				}
				mustVerify(t, l, 3)
			})
		})
	}
}

// Verify reports both anchors and what each says.
func TestVerifyReportsAnchors(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l := New(openStore(t, db), db.dir)
		res, err := l.Verify(context.Background())
		if err != nil || !res.OK || len(res.Anchors) != 2 || res.Anchors[0].State != AnchorAgrees || res.Anchors[1].State != AnchorNotYet {
			t.Fatalf("empty log: %+v %v", res, err)
		}
		for i := range 2 {
			if _, err := l.Append(context.Background(), entry(i)); err != nil {
				t.Fatal(err)
			}
		}
		res, err = l.Verify(context.Background())
		if err != nil || !res.OK {
			t.Fatalf("verify: %+v %v", res, err)
		}
		for _, a := range res.Anchors {
			if a.State != AnchorAgrees || a.Seq != 2 || a.Hash != res.HeadHash {
				t.Fatalf("anchor %+v, want both at record 2", a)
			}
		}
		if g := res.Anchors[0].Guarded; g == nil || *g || res.Anchors[0].Guard == "" {
			t.Fatalf("store anchor's guard = %v %q, want reported unguarded with the reason", g, res.Anchors[0].Guard)
		}
	})
}
