package store

import "context"

// OpenSQLiteSync opens the database with the given synchronous setting
// instead of FULL: the audit benchmarks measure the old NORMAL rule beside
// the durable one.
func OpenSQLiteSync(ctx context.Context, path, sync string) (*SQLite, error) {
	return openSQLite(ctx, path, sync)
}
