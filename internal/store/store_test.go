package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"modernc.org/sqlite"
)

func TestOpenCreatesPrivateFileAndMigrates(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("db mode = %v, want 0600", fi.Mode().Perm())
	}
	v, err := s.SchemaVersion(context.Background())
	if err != nil || v != len(migrations) {
		t.Errorf("schema version = %d, %v; want %d", v, err, len(migrations))
	}
	// Re-opening applies nothing and keeps the version.
	s2, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	_ = s2.Close()
}

func TestRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO schema_migrations VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := Open(context.Background(), dir); err == nil {
		t.Fatal("opened a database with a newer schema")
	}
}

// Every connection of the pool, and the audit appends' own, commits
// durably: WAL mode with synchronous=FULL (2), which syncs the WAL at each
// commit. NORMAL (1) would leave the last commits to the next checkpoint.
// The sync is fdatasync (data and size; not the timestamps).
func TestSQLiteCommitsAreDurable(t *testing.T) {
	s, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range maxOpenConns {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	check := func(name string, c *sql.Conn) {
		t.Helper()
		var sync int
		var mode string
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if sync != 2 || mode != "wal" {
			t.Errorf("%s: synchronous=%d journal_mode=%s, want 2 (FULL) and wal", name, sync, mode)
		}
	}
	for i, c := range conns {
		check(fmt.Sprintf("pool connection %d", i), c)
	}
	s.auditMu.Lock()
	check("the audit connection", s.audit.conn)
	s.auditMu.Unlock()
	if !sqlite.FdatasyncEnabled() {
		t.Error("SQLite syncs with fsync, want fdatasync")
	}
}

// An audit batch whose build or beforeCommit fails, or panics, is rolled
// back and leaves the audit connection out of any transaction: the next
// append works, and nothing of the failed one is stored.
func TestSQLiteAuditAppendRollsBack(t *testing.T) {
	s, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	rec := func(last AuditRecord, ok bool) AuditRecord {
		r := AuditRecord{Seq: 1, Action: "x", Time: time.Unix(1, 0), PrevHash: "p", Hash: fmt.Sprint("h", last.Seq+1)}
		if ok {
			r.Seq = last.Seq + 1
		}
		return r
	}
	build := func(last AuditRecord, ok bool) ([]AuditRecord, error) {
		return []AuditRecord{rec(last, ok)}, nil
	}
	boom := errors.New("boom")
	if _, err := s.AppendAuditBatch(ctx, build, func(AuditRecord) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing beforeCommit: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the caller")
			}
		}()
		_, _ = s.AppendAuditBatch(ctx, func(last AuditRecord, ok bool) ([]AuditRecord, error) {
			if _, err := s.audit.insert.ExecContext(ctx, 7, 1, "", "", "", "y", "", "", "", []byte{}, "", "h7"); err != nil {
				t.Error(err)
			}
			panic("build panics")
		}, nil)
	}()
	got, err := s.AppendAuditBatch(ctx, build, nil)
	if err != nil {
		t.Fatalf("the append after a rollback: %v", err)
	}
	if got[0].Seq != 1 {
		t.Fatalf("stored seq %d, want 1: a failed batch left a record", got[0].Seq)
	}
	n := 0
	if err := s.ScanAudit(ctx, func(AuditRecord) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("%d records stored (%v), want 1", n, err)
	}
}
