package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
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

// Every connection of the pool commits durably: WAL mode with
// synchronous=FULL (2), which fsyncs the WAL at each commit. NORMAL (1)
// would leave the last commits to the next checkpoint.
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
	for i := range maxOpenConns {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var sync int
		var mode string
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if sync != 2 || mode != "wal" {
			t.Errorf("connection %d: synchronous=%d journal_mode=%s, want 2 (FULL) and wal", i, sync, mode)
		}
	}
}
