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
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // the pure-Go "sqlite" driver (registers itself)
)

// FileName is the database file inside the data dir.
const FileName = "sandhold.db"

// busyTimeoutMS is how long a writer waits for another writer (the server vs.
// a CLI invocation) before failing with SQLITE_BUSY.
const busyTimeoutMS = 5000

// maxOpenConns: SQLite serializes writers anyway; a few connections let
// readers proceed under WAL while one writes. The audit appends have one
// more of their own (auditConn).
const maxOpenConns = 4

// SQLite is the embedded Store.
type SQLite struct {
	db   *sql.DB
	path string

	// lastAuditStmt serves LastAudit on the pool.
	lastAuditStmt *sql.Stmt
	// keyByHashStmt serves KeyByHash on the pool: the key check's read
	// on a key-cache miss, so SQLite does not parse and plan the query
	// again on every one.
	keyByHashStmt *sql.Stmt

	// auditMu serializes this store's audit appends, which run on a
	// connection of their own (the hottest write: one per call).
	auditMu sync.Mutex
	audit   auditConn

	// deferredWrites counts the writes that left their flush to a call's
	// audit commit (FlushWindow); tests read it.
	deferredWrites atomic.Int64
}

// auditConn is the connection the audit appends run on, with their
// statements prepared on it once. Keeping the appends off the pool's
// sql.Tx and cancellable contexts is what makes a lone append cheap: for
// a context that can be cancelled, database/sql starts a goroutine per
// transaction and modernc.org/sqlite one per statement, and on this
// project's machines each goroutine start and wake-up (a futex, a context
// switch) costs more than the statement. The connection stays open, so
// the WAL is never deleted by a last close and is rewritten in place.
type auditConn struct {
	conn                                                  *sql.Conn
	begin, last, insert, mark, moveHead, commit, rollback *sql.Stmt
}

// close releases the statements and the connection.
func (a *auditConn) close() {
	for _, st := range []*sql.Stmt{a.begin, a.last, a.insert, a.mark, a.moveHead, a.commit, a.rollback} {
		if st != nil {
			_ = st.Close()
		}
	}
	if a.conn != nil {
		_ = a.conn.Close()
	}
	*a = auditConn{}
}

// openAuditConn takes the audit appends' connection from the pool (it is
// opened with the same pragmas) and prepares their statements on it.
func (s *SQLite) openAuditConn(ctx context.Context) error {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	a := auditConn{conn: c}
	for _, p := range []struct {
		st *(*sql.Stmt)
		q  string
	}{
		{&a.begin, "BEGIN IMMEDIATE"}, // writers in other processes wait for it
		{&a.last, lastLinkQuery},
		{&a.insert, insertAuditQuery},
		{&a.mark, insertAuditMarkQuery},
		{&a.moveHead, moveHeadQuery},
		{&a.commit, "COMMIT"},
		{&a.rollback, "ROLLBACK"},
	} {
		if *p.st, err = c.PrepareContext(ctx, p.q); err != nil {
			a.close()
			return err
		}
	}
	s.audit = a
	return nil
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

// useFdatasync makes SQLite sync its files with fdatasync(2) rather than
// fsync(2) (modernc.org/sqlite keeps SQLite's source default, fsync; the
// usual Linux builds of SQLite use fdatasync). fdatasync writes the data
// and the metadata needed to read it back (the size, the blocks); it
// skips only the timestamps, which on ext4 cost a journal commit per sync
// once the clock has ticked since the last one. A commit is exactly as
// durable. Process-wide: every SQLite connection of this process.
func useFdatasync() error {
	_, err := sqlite.Fdatasync(true)
	if errors.Is(err, sqlite.ErrFdatasyncUnavailable) {
		return nil // not on this platform: SQLite keeps its own sync call
	}
	return err
}

// OpenSQLite opens (creating 0600 if needed) the database at path and
// applies pending migrations.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	return openSQLite(ctx, path, synchronous, true)
}

// openSQLite is OpenSQLite with the flush rule named (tests measure the
// old NORMAL against FULL) and the WAL's sizing ahead chosen (a benchmark
// measures commits into a WAL that grows against one sized ahead).
func openSQLite(ctx context.Context, path, sync string, sizeWAL bool) (*SQLite, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store: path must not contain ? or #")
	}
	// Create the file ourselves so it starts 0600; SQLite gives its -wal
	// and -shm files the same mode.
	f, err := os.OpenFile(filepath.Clean(path), os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // G703: the operator's data dir (SANDBOX_DATA_DIR) or a test's temp dir, never a client's input
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	_ = f.Close()
	if err := useFdatasync(); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}

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
	db.SetMaxOpenConns(maxOpenConns + 1) // + the audit appends' own
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &SQLite{db: db, path: path}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	if s.lastAuditStmt, err = db.PrepareContext(ctx, lastAuditQuery); err == nil {
		s.keyByHashStmt, err = db.PrepareContext(ctx, keyByHashQuery)
	}
	if err == nil {
		err = s.openAuditConn(ctx)
	}
	if err == nil && sizeWAL {
		err = s.presizeWAL(ctx)
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
	s.auditMu.Lock()
	s.audit.close()
	s.auditMu.Unlock()
	for _, st := range []*sql.Stmt{s.lastAuditStmt, s.keyByHashStmt} {
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
