package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migration is one schema step. Steps are applied in slice order, each in its
// own transaction, and recorded in schema_migrations. Never edit or reorder a
// released step: append a new one.
type migration struct {
	version int
	name    string
	up      string
}

// migrations is the ordered schema history. Append only.
var migrations = []migration{
	{1, "keys", `
CREATE TABLE keys (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	role       TEXT NOT NULL,
	hash       BLOB NOT NULL UNIQUE,
	created_ns INTEGER NOT NULL,
	revoked_ns INTEGER NOT NULL DEFAULT 0
);`},
	{2, "audit", `
CREATE TABLE audit (
	seq         INTEGER PRIMARY KEY,
	time_ns     INTEGER NOT NULL,
	actor       TEXT NOT NULL,
	role        TEXT NOT NULL,
	client_addr TEXT NOT NULL,
	action      TEXT NOT NULL,
	target      TEXT NOT NULL,
	sandbox     TEXT NOT NULL,
	verdict     TEXT NOT NULL,
	detail      BLOB NOT NULL,
	prev_hash   TEXT NOT NULL,
	hash        TEXT NOT NULL
);
CREATE INDEX audit_time ON audit(time_ns);
CREATE INDEX audit_actor ON audit(actor, seq);
CREATE INDEX audit_action ON audit(action, seq);
CREATE INDEX audit_sandbox ON audit(sandbox, seq);`},
	{3, "settings", `
CREATE TABLE settings (
	key        TEXT PRIMARY KEY,
	value      BLOB NOT NULL,
	updated_ns INTEGER NOT NULL
);`},
	{4, "sandboxes", `
CREATE TABLE sandboxes (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	record     BLOB NOT NULL,
	updated_ns INTEGER NOT NULL
);
CREATE INDEX sandboxes_owner ON sandboxes(owner);`},
	// The node that runs a sandbox: a shared (PostgreSQL) store holds the
	// records of every node, and each node loads only its own. Embedded
	// SQLite has one node, "".
	{5, "sandbox_node", `
ALTER TABLE sandboxes ADD COLUMN node TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_node ON sandboxes(node);`},
	// The nodes of a cluster (PostgreSQL): each registers its address and
	// a heartbeat; SQLite keeps the empty table so both histories match.
	{6, "nodes", `
CREATE TABLE nodes (
	name         TEXT PRIMARY KEY,
	address      TEXT NOT NULL,
	started_ns   BIGINT NOT NULL,
	heartbeat_ns BIGINT NOT NULL,
	draining     BOOLEAN NOT NULL DEFAULT FALSE
);`},
	// A node's capacity (how many sandboxes it takes; 0: no limit), read by
	// placement, and the approvals shared by the nodes of a cluster (one
	// JSON document each, owned by internal/approvals). SQLite keeps both
	// so the histories match; one host holds approvals in memory.
	{7, "capacity_approvals", `
ALTER TABLE nodes ADD COLUMN capacity INTEGER NOT NULL DEFAULT 0;
CREATE TABLE approvals (
	id  TEXT PRIMARY KEY,
	doc BLOB NOT NULL
);`},
	// One-time tickets shared by the nodes of a cluster (a ticket minted
	// through one node opens a WebSocket through any other). SQLite keeps
	// the empty table so the histories match; one host holds tickets in
	// memory.
	{8, "tickets", `
CREATE TABLE tickets (
	hash       BLOB PRIMARY KEY,
	key_id     TEXT NOT NULL,
	expires_ns INTEGER NOT NULL
);
CREATE INDEX tickets_key ON tickets(key_id);`},
	// A key's own rate limits, set by an admin at creation (ParseRules
	// syntax, canonical; '' = the server's limits).
	{9, "key_rate_limits", `
ALTER TABLE keys ADD COLUMN rate_limits TEXT NOT NULL DEFAULT '';`},
	// Two audit indexes no query used (TestAuditQueryPlans): every call's
	// record wrote a page of each. A since filter and an action filter
	// (always "= a OR LIKE 'a.%'") were planned as a scan in seq order
	// with or without them, so their pages were pure cost on every append.
	// BENCHMARKS.md "The create above the manager" has the query times on
	// 1M records with and without them.
	{10, "audit_unused_indexes", `
DROP INDEX IF EXISTS audit_time;
DROP INDEX IF EXISTS audit_action;`},
	// A since filter scanned the log from its first record (seq order;
	// time is not monotonic in seq, so no seq bound followed from a time):
	// 0.3-0.6 s on 1M records. audit_marks holds, for every
	// auditMarkEvery-th seq, the latest time of any record up to it; a
	// query starts after the last mark whose time is before its since
	// (auditQuery). The existing log is marked here, once.
	{11, "audit_marks", `
CREATE TABLE audit_marks (
	seq         INTEGER PRIMARY KEY,
	max_time_ns INTEGER NOT NULL
);` + auditMarksFill},
	// The store's anchor of the audit chain (head.go): the head of an
	// existing log starts at its last record. The triggers refuse to
	// delete the row or move it back.
	{12, "audit_head_anchor", `
CREATE TABLE audit_head (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	seq  INTEGER NOT NULL,
	hash TEXT NOT NULL
);
INSERT INTO audit_head(id, seq, hash)
	SELECT 1, COALESCE((SELECT seq FROM audit ORDER BY seq DESC LIMIT 1), 0), COALESCE((SELECT hash FROM audit ORDER BY seq DESC LIMIT 1), '');
CREATE TRIGGER audit_head_keep BEFORE DELETE ON audit_head
	BEGIN SELECT RAISE(ABORT, 'the audit head is never deleted'); END;
CREATE TRIGGER audit_head_forward BEFORE UPDATE ON audit_head WHEN NEW.seq < OLD.seq OR NEW.id <> OLD.id
	BEGIN SELECT RAISE(ABORT, 'the audit head never moves back'); END;`},
	// The lease by which a server holds its node name (lease.go): one live
	// server per name. SQLite keeps the empty table so the histories match;
	// one host's lease is its data dir's lock.
	{13, "node_leases", nodeLeasesTable},
}

func (s *SQLite) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_ns INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var current int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	latest := 0
	for i, m := range migrations {
		if m.version != i+1 {
			return fmt.Errorf("migrate: migration %q has version %d, want %d", m.name, m.version, i+1)
		}
		latest = m.version
	}
	if current > latest {
		return fmt.Errorf("migrate: database schema version %d is newer than this binary's %d; refusing to downgrade", current, latest)
	}
	for _, m := range migrations[current:] {
		err := s.withTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, m.up); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, applied_ns) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UnixNano())
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: step %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

// SchemaVersion returns the highest applied migration.
func (s *SQLite) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// nodeLeasesTable is step 13 of both histories (the same SQL reads alike
// in SQLite and PostgreSQL).
const nodeLeasesTable = `
CREATE TABLE node_leases (
	name       TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	dir_id     TEXT NOT NULL DEFAULT '',
	info       TEXT NOT NULL,
	expires_ns BIGINT NOT NULL
);`
