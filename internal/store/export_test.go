package store

import "context"

// OpenSQLiteSync opens the database with the given synchronous setting
// instead of FULL: the audit benchmarks measure the old NORMAL rule beside
// the durable one.
func OpenSQLiteSync(ctx context.Context, path, sync string) (*SQLite, error) {
	return openSQLite(ctx, path, sync, true)
}

// WALTarget is the size the store gives its WAL at open for pages of
// pageSize (walsize.go).
func WALTarget(pageSize int64) int64 { return walTarget(pageSize) }

// OpenSQLiteGrowingWAL opens the database without sizing its WAL ahead:
// BenchmarkWALSized measures commits into a WAL that grows beside ones
// into a WAL sized at open.
func OpenSQLiteGrowingWAL(ctx context.Context, path string) (*SQLite, error) {
	return openSQLite(ctx, path, synchronous, false)
}
