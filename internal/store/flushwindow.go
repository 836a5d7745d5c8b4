package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
)

// A flush window lets a call's own writes to sandhold.db leave their flush
// to the durable commit that follows them before the call is answered: the
// commit of the call's audit record, in the same database.
//
// Why it is as durable: in WAL mode a commit appends its frames to the one
// WAL file, and a commit under synchronous=FULL ends with fdatasync of that
// file, which writes every frame appended before it, whichever connection
// appended it. A write made in the window commits under synchronous=NORMAL
// (its frames are appended, not synced); the audit record's transaction
// begins after it (SQLite serializes writers, and the record is queued only
// once the call's run has returned) and syncs the file, so the write is on
// disk before the answer, exactly as if it had synced itself. A crash
// before that sync loses the write and leaves the call unanswered, which is
// the same as a crash before the write. If the record's commit fails, the
// dispatcher withholds the call's result and answers with an error; the
// write, already visible, reaches the disk with the next sync.
//
// The window is closed before the record is appended, and closing waits for
// writes still in flight, so a write that a call leaves behind (a goroutine
// that outlives it) never rides on a sync that has already happened: after
// Close every write syncs itself again.
type FlushWindow struct {
	s    *SQLite
	mu   sync.RWMutex // held shared by a deferred write, exclusively by Close
	shut bool
}

type flushWindowKey struct{}

// OpenFlushWindow returns ctx carrying a new flush window on s, and the
// function that closes it. The caller promises that, after calling close
// and before answering, it commits a transaction on s under
// synchronous=FULL (the dispatcher: the call's audit record, whose log
// writes to s). Close is idempotent.
func (s *SQLite) OpenFlushWindow(ctx context.Context) (context.Context, func()) {
	w := &FlushWindow{s: s}
	return context.WithValue(ctx, flushWindowKey{}, w), w.close
}

func (w *FlushWindow) close() {
	w.mu.Lock()
	w.shut = true
	w.mu.Unlock()
}

// deferredFlush runs write on a pool connection that commits without its own
// sync when ctx carries an open flush window on s, and reports whether it
// did; with no window (or a closed one, or another store's) it runs nothing
// and returns false, and the caller writes the ordinary, self-syncing way.
func (s *SQLite) deferredFlush(ctx context.Context, write func(c *sql.Conn) error) (bool, error) {
	w, _ := ctx.Value(flushWindowKey{}).(*FlushWindow)
	if w == nil || w.s != s {
		return false, nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.shut {
		return false, nil
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return true, err
	}
	defer func() { _ = c.Close() }()
	if _, err := c.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
		return true, err
	}
	werr := write(c)
	// The connection goes back to the pool: it must sync its commits again,
	// or be closed instead.
	if _, err := c.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous="+synchronous); err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		if werr == nil {
			werr = fmt.Errorf("restore synchronous: %w", err)
		}
	}
	s.deferredWrites.Add(1)
	return true, werr
}

// FlushWindows: SQLite's writes may leave their flush to the next
// synchronous commit on the same file.
func (s *SQLite) FlushWindows() func(context.Context) (context.Context, func()) {
	return s.OpenFlushWindow
}

// FlushWindows: none; every PostgreSQL commit is its own.
func (s *Postgres) FlushWindows() func(context.Context) (context.Context, func()) { return nil }
