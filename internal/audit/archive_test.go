package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// agedLog is a log whose records are n minutes apart, the first n-1
// minutes before the clock's now.
func agedLog(t *testing.T, db testDB, n int, opts ...Option) (*Log, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	l := New(openStore(t, db), db.dir, append([]Option{WithClock(c.now)}, opts...)...)
	for i := range n {
		if i > 0 {
			c.add(time.Minute)
		}
		if _, err := l.Append(context.Background(), entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	return l, c
}

// Issue 29: retention archives the oldest records with an anchor, and
// Verify proves the stored chain from it; the archive itself verifies.
func TestRetainByAgeArchivesAndVerifyProvesFromTheAnchor(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l, _ := agedLog(t, db, 30)
		// Records 1..20 are 10 minutes old or more.
		res, err := l.Retain(context.Background(), Retention{MaxAge: 10*time.Minute - time.Second})
		if err != nil {
			t.Fatal(err)
		}
		a := res.Archived
		if a == nil || a.From != 1 || a.Through != 20 || a.Records != 20 || a.Reason != "age" {
			t.Fatalf("archived %+v, want records 1..20 by age", a)
		}
		if _, err := os.Stat(filepath.Join(db.dir, ArchiveDir, a.File)); err != nil {
			t.Fatal(err)
		}
		first, err := l.st.FirstAudit(context.Background())
		if err != nil || first.Seq != 21 {
			t.Fatalf("first stored = %d (%v), want 21", first.Seq, err)
		}
		v, err := l.Verify(context.Background())
		if err != nil || !v.OK || v.ArchivedThrough != 20 || v.Records != 11 || v.HeadSeq != 31 {
			t.Fatalf("verify = %+v (%v), want OK from the anchor: records 21..31", v, err)
		}
		for _, an := range v.Anchors {
			if an.Seq != 31 || an.State != AnchorAgrees {
				t.Fatalf("anchor %+v, want at the archive's anchor record 31", an)
			}
		}
		if c, err := l.VerifyArchives(context.Background()); err != nil || !c.OK || c.Files != 1 || c.Records != 20 || c.From != 1 {
			t.Fatalf("archives = %+v (%v)", c, err)
		}
		// Nothing more is old enough: another round archives nothing.
		if res, err := l.Retain(context.Background(), Retention{MaxAge: 10*time.Minute - time.Second}); err != nil || res.Archived != nil {
			t.Fatalf("second round = %+v (%v)", res, err)
		}
	})
}

// Removing stored records at the start is found whether or not records
// were archived before: only an anchor naming exactly the removed records
// proves the start of the stored chain.
func TestVerifyFindsRecordsRemovedAtTheStart(t *testing.T) {
	tests := []struct {
		name     string
		archive  bool
		del      string
		firstBad int64
	}{
		{"no archive, first records deleted", false, `DELETE FROM audit WHERE seq <= 5`, 1},
		{"after an archive, the next records deleted", true, `DELETE FROM audit WHERE seq <= 25`, 21},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, db testDB) {
				l, _ := agedLog(t, db, 30)
				if tc.archive {
					if _, err := l.Retain(context.Background(), Retention{MaxAge: 10*time.Minute - time.Second}); err != nil {
						t.Fatal(err)
					}
				}
				db.exec(t, tc.del)
				v, err := l.Verify(context.Background())
				if err != nil || v.OK || v.FirstBad != tc.firstBad || !strings.Contains(v.Problem, "no archive anchor") {
					t.Fatalf("verify = %+v (%v), want records from %d missing", v, err, tc.firstBad)
				}
			})
		})
	}
}

// No caller can write an anchor (or any record as the system), so none
// can make a later deletion look like an archive.
func TestAppendRefusesReservedRecords(t *testing.T) {
	l, _ := newLog(t)
	for _, e := range []Entry{
		{Action: ActionArchive, Verdict: Allow, Detail: map[string]any{"through": 1}},
		{Action: ActionArchiveDrop, Verdict: Allow},
		{Action: "audit.archive.x", Verdict: Allow},
		{Action: "exec.run", Role: RoleSystem, Verdict: Allow},
	} {
		if _, err := l.Append(context.Background(), e); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("%+v: %v, want refused as reserved", e, err)
		}
	}
}

// failingTrim makes TrimAudit fail (a conflict, a crash before commit).
type failingTrim struct{ store.Store }

func (failingTrim) TrimAudit(context.Context, int64, int64, func(store.AuditRecord, bool) ([]store.AuditRecord, error)) ([]store.AuditRecord, error) {
	return nil, errors.New("lost the race")
}

// Nothing is lost on a failed or crashed round: records stay stored until
// the transaction that removes them commits, and an archive written for a
// round that did not commit is removed (its records are still stored and
// will be archived again).
func TestRetainNeverLosesRecords(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l, c := agedLog(t, db, 30)
		failing := New(failingTrim{l.st}, db.dir, WithClock(c.now))
		if _, err := failing.Retain(context.Background(), Retention{MaxAge: 10*time.Minute - time.Second}); err == nil {
			t.Fatal("a failed trim reported success")
		}
		files, _, _ := listArchives(filepath.Join(db.dir, ArchiveDir))
		if len(files) != 0 {
			t.Fatalf("a failed round left %v", files)
		}
		mustVerify(t, l, 30)
		// A crash after the file's rename, before the commit: a file
		// whose records are still stored, and a temp file.
		dir := filepath.Join(db.dir, ArchiveDir)
		for _, name := range []string{archiveName(1, 12), ".archive-123.tmp"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		res, err := l.Retain(context.Background(), Retention{MaxAge: 10*time.Minute - time.Second})
		if err != nil || res.Archived == nil || res.Archived.Through != 20 {
			t.Fatalf("retain after a crash = %+v (%v)", res, err)
		}
		files, _, _ = listArchives(dir)
		if len(files) != 1 || files[0].name != archiveName(1, 20) {
			t.Fatalf("archives = %+v, want only 1..20", files)
		}
		if _, err := os.Stat(filepath.Join(dir, ".archive-123.tmp")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("temp file left: %v", err)
		}
		if c, err := l.VerifyArchives(context.Background()); err != nil || !c.OK {
			t.Fatalf("archives = %+v (%v)", c, err)
		}
	})
}

// Only an intact chain is archived: an edited record stays where Verify
// reports it.
func TestRetainRefusesABrokenChain(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l, _ := agedLog(t, db, 30)
		db.exec(t, `UPDATE audit SET target = 'x' WHERE seq = 7`)
		if _, err := l.Retain(context.Background(), Retention{MaxAge: 10*time.Minute - time.Second}); err == nil || !strings.Contains(err.Error(), "record 7") {
			t.Fatalf("retain over an edited record: %v", err)
		}
		if first, _ := l.st.FirstAudit(context.Background()); first.Seq != 1 {
			t.Fatalf("records were removed: first = %d", first.Seq)
		}
		if v, _ := l.Verify(context.Background()); v.OK || v.FirstBad != 7 {
			t.Fatalf("verify = %+v", v)
		}
	})
}

// The budget: the stored records are archived down to their half of it,
// the archives beyond the other half are deleted (oldest first) with a
// record saying so, and the chain still verifies.
func TestRetainKeepsTheBudget(t *testing.T) {
	eachBackend(t, func(t *testing.T, db testDB) {
		l, _ := agedLog(t, db, 200, WithSegments(10, 60))
		sz, err := l.st.AuditSize(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		budget := sz.Bytes // the stored half is half the records
		var archived []*ArchiveAnchor
		for range 10 {
			res, err := l.Retain(context.Background(), Retention{Budget: budget})
			if err != nil {
				t.Fatal(err)
			}
			if res.Archived == nil {
				break
			}
			archived = append(archived, res.Archived)
		}
		if len(archived) < 2 || archived[0].Reason != "size" || archived[0].Records != 60 {
			t.Fatalf("archived %d segments (%+v), want several of at most 60 by size", len(archived), archived)
		}
		sz, err = l.st.AuditSize(context.Background())
		if err != nil || sz.Bytes > budget/2 {
			t.Fatalf("stored %+v (%v), want at most half of %d", sz, err, budget)
		}
		mustVerifyArchived(t, l)
		// A budget smaller than the stored records and the archives:
		// the oldest archive goes (no segment is archived: this log's
		// smallest segment is larger than the log).
		files, total, _ := listArchives(filepath.Join(db.dir, ArchiveDir))
		sz, err = l.st.AuditSize(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		l = New(l.st, db.dir, WithSegments(1e6, 1e6))
		res, err := l.Retain(context.Background(), Retention{Budget: sz.Bytes + total - files[0].size})
		if err != nil || len(res.Dropped) != 1 || res.Dropped[0] != files[0].name {
			t.Fatalf("drop = %+v (%v), want the oldest archive %s", res, err, files[0].name)
		}
		drops, err := l.Query(context.Background(), Filter{Action: ActionArchiveDrop})
		if err != nil || len(drops) != 1 || drops[0].Target != files[0].name || drops[0].Role != RoleSystem {
			t.Fatalf("drop records = %+v (%v)", drops, err)
		}
		mustVerifyArchived(t, l)
		if c, err := l.VerifyArchives(context.Background()); err != nil || !c.OK || c.From != files[1].from {
			t.Fatalf("archives after a drop = %+v (%v), want them to start at %d", c, err, files[1].from)
		}
	})
}

func mustVerifyArchived(t *testing.T, l *Log) {
	t.Helper()
	v, err := l.Verify(context.Background())
	if err != nil || !v.OK || v.ArchivedThrough == 0 {
		t.Fatalf("verify = %+v (%v), want OK from an archive", v, err)
	}
	if c, err := l.VerifyArchives(context.Background()); err != nil || !c.OK {
		t.Fatalf("archives = %+v (%v)", c, err)
	}
}

// A changed archive file, or one no anchor names, is reported.
func TestVerifyArchivesFindsChangedFiles(t *testing.T) {
	l, dir := newLog(t)
	c := &clock{t: time.Now()}
	l.now = c.now
	fill(t, l, 12)
	c.add(time.Hour)
	res, err := l.Retain(context.Background(), Retention{MaxAge: time.Minute})
	if err != nil || res.Archived == nil {
		t.Fatalf("retain = %+v %v", res, err)
	}
	path := filepath.Join(dir, ArchiveDir, res.Archived.File)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := l.VerifyArchives(context.Background()); err != nil || c.OK || !strings.Contains(c.Problem, "was changed") {
		t.Fatalf("archives after an edit = %+v (%v)", c, err)
	}
	if err := os.Rename(path, filepath.Join(dir, ArchiveDir, archiveName(1, 5))); err != nil {
		t.Fatal(err)
	}
	if c, err := l.VerifyArchives(context.Background()); err != nil || c.OK || !strings.Contains(c.Problem, "named by no anchor") {
		t.Fatalf("archives with a foreign file = %+v (%v)", c, err)
	}
}
