package store

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// The WAL is sized ahead of the commits. SQLite appends a commit's frames
// at the end of the WAL and, until its automatic checkpoint starts the WAL
// over (at walAutoCheckpoint pages), the end is the end of the file: every
// commit grows the file, and an fdatasync of a file whose size changed
// also commits the file system's journal (ext4: the size and the new
// blocks), a second flush beside the frames' own. Measured on this
// project's machines, four frames appended and synced cost 100–240 µs more
// than the same four written in place (BENCHMARKS.md, "The WAL sized
// ahead"), on the path of every call until the first checkpoint — the
// first ≈ 200 calls after every start, since SQLite deletes the WAL when
// the last connection closes.
//
// So when the store opens, the WAL file is extended with zeros, written
// and synced once, to hold walPresizeFrames frames: the commits then
// overwrite blocks that exist, and SQLite's one sync per commit is the
// only flush. The file's content is not changed: the zeros lie after every
// frame SQLite wrote, and a frame of zeros is not a valid frame (page 0,
// no matching salt), so SQLite's recovery stops there, as it stops at the
// stale frames of an earlier round of the WAL, which it leaves in the file
// in the same way. The zeros are written under SQLite's write lock (a
// BEGIN IMMEDIATE on the audit connection), so no writer in this or
// another process appends frames meanwhile and no recovery reads the file
// while it grows. SQLite truncates the WAL only when asked to
// (journal_size_limit, a TRUNCATE checkpoint; sandhold does neither) and
// deletes it when its last connection closes; TestWALWrittenInPlace fails
// if a commit changes the WAL's size.

// walAutoCheckpoint is SQLite's default automatic checkpoint, in pages
// (SQLITE_DEFAULT_WAL_AUTOCHECKPOINT); the store does not change it.
const walAutoCheckpoint = 1000

// walPresizeFrames is the frames the WAL is sized for: the checkpoint's
// mark, and room for the batch that passes it (a batch of 64 records
// writes its table and index pages, a few per record at most).
const walPresizeFrames = walAutoCheckpoint + 512

// walHeaderSize and walFrameHeaderSize are SQLite's WAL format.
const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
)

// walPresizeChunk is the zeros written at a time.
const walPresizeChunk = 256 << 10

// walPath is the WAL file SQLite keeps beside the database.
func (s *SQLite) walPath() string { return s.path + "-wal" }

// walTarget is the size presizeWAL gives the WAL for pages of pageSize.
func walTarget(pageSize int64) int64 {
	return walHeaderSize + walPresizeFrames*(walFrameHeaderSize+pageSize)
}

// presizeWAL extends the WAL with zeros to walTarget (see above), under
// SQLite's write lock, and syncs it; a WAL as large or larger is left as
// it is. Called by openSQLite once the audit connection is open.
func (s *SQLite) presizeWAL(ctx context.Context) (err error) {
	a := &s.audit
	bg := context.WithoutCancel(ctx)
	var pageSize int64
	if err := a.conn.QueryRowContext(bg, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return fmt.Errorf("size the WAL: page size: %w", err)
	}
	if pageSize < 512 || pageSize > 65536 {
		return fmt.Errorf("size the WAL: page size %d", pageSize)
	}
	if _, err := a.begin.ExecContext(bg); err != nil {
		return fmt.Errorf("size the WAL: begin: %w", err)
	}
	defer func() {
		if _, rerr := a.rollback.ExecContext(bg); rerr != nil && err == nil {
			err = fmt.Errorf("size the WAL: rollback: %w", rerr)
		}
	}()
	f, err := os.OpenFile(s.walPath(), os.O_WRONLY, 0) //nolint:gosec // G304: the store's WAL beside its database in the operator's data dir (SANDBOX_DATA_DIR) or a test's temp dir, never a client's input
	if errors.Is(err, os.ErrNotExist) {
		return nil // not in WAL mode on this file system: nothing to size
	}
	if err != nil {
		return fmt.Errorf("size the WAL: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("size the WAL: %w", cerr)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("size the WAL: %w", err)
	}
	want := walTarget(pageSize)
	if fi.Size() >= want {
		return nil
	}
	zeros := make([]byte, walPresizeChunk)
	for off := fi.Size(); off < want; {
		n := min(int64(len(zeros)), want-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("size the WAL: %w", err)
		}
		off += n
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("size the WAL: sync: %w", err)
	}
	return nil
}
