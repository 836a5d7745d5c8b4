package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// FileName is the database file inside the data dir.
const FileName = "sandhold.db"

// busyTimeoutMS is how long a writer waits for another writer (the server vs.
// a CLI invocation) before failing with SQLITE_BUSY.
const busyTimeoutMS = 5000

// maxOpenConns: SQLite serializes writers anyway; a few connections let
// readers proceed under WAL while one writes.
const maxOpenConns = 4

// SQLite is the embedded Store.
type SQLite struct {
	db   *sql.DB
	path string

	// Statements of the audit append, the hottest write (one per exec):
	// prepared once instead of parsed per call.
	lastAuditStmt   *sql.Stmt
	insertAuditStmt *sql.Stmt
}

var _ Store = (*SQLite)(nil)

// synchronous is SQLite's flush rule. In WAL mode FULL fsyncs the WAL at
// every commit, so a transaction that COMMIT reported done survives a power
// loss as well as a crash of the process; NORMAL fsyncs only at checkpoints
// and may lose the last commits on power loss. Every write here is rare
// except the audit append, and audit records are appended in groups (one
// commit for the appends that arrive together, see package audit), so the
// durable rule costs one fsync per group.
const synchronous = "FULL"

// OpenSQLite opens (creating 0600 if needed) the database at path and
// applies pending migrations.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	return openSQLite(ctx, path, synchronous)
}

// openSQLite is OpenSQLite with the flush rule named (tests measure the
// old NORMAL against FULL).
func openSQLite(ctx context.Context, path, sync string) (*SQLite, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store: path must not contain ? or #")
	}
	// Create the file ourselves so it starts 0600; SQLite gives its -wal
	// and -shm files the same mode.
	f, err := os.OpenFile(filepath.Clean(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	_ = f.Close()

	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate") // writers take the lock at BEGIN: no upgrade deadlocks
	dsn := "file:" + path + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	db.SetMaxOpenConns(maxOpenConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &SQLite{db: db, path: path}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	if s.lastAuditStmt, err = db.PrepareContext(ctx, lastAuditQuery); err == nil {
		s.insertAuditStmt, err = db.PrepareContext(ctx, insertAuditQuery)
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open store: prepare: %w", err)
	}
	return s, nil
}

// Open opens the default store in dataDir.
func Open(ctx context.Context, dataDir string) (*SQLite, error) {
	return OpenSQLite(ctx, filepath.Join(dataDir, FileName))
}

// Path returns the database file path.
func (s *SQLite) Path() string { return s.path }

// Close closes the database.
func (s *SQLite) Close() error {
	for _, st := range []*sql.Stmt{s.lastAuditStmt, s.insertAuditStmt} {
		if st != nil {
			_ = st.Close()
		}
	}
	return s.db.Close()
}

// withTx runs fn inside a write transaction (BEGIN IMMEDIATE).
func (s *SQLite) withTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// isUnique reports a UNIQUE/PRIMARY KEY constraint failure.
func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// Times are stored as unix nanoseconds (sortable, exact) in INTEGER columns.
func toNS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
