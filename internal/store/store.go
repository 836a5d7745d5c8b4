// Package store is sandhold's durable state: API keys (hashes only), the
// audit record stream, a small settings key-value table and the sandbox
// records, behind one interface with two back ends: embedded SQLite for one
// host, PostgreSQL (postgres.go) for the nodes of a cluster.
//
// The default back end is an embedded SQLite database (modernc.org/sqlite,
// pure Go, so the binary stays CGO_ENABLED=0) at <datadir>/sandhold.db, in WAL
// mode with a busy timeout so that the server and a concurrently run CLI
// (`sandhold keys create`) can share it. Schema changes are versioned
// migrations (migrations.go), applied in order inside one transaction each.
package store

import (
	"context"
	"errors"
	"os"
	"time"
)

// Sentinels callers branch on.
var (
	// ErrNotFound: the key/setting/record does not exist (→ 404 or "absent").
	ErrNotFound = errors.New("not found")
	// ErrConflict: a uniqueness rule refused the write (duplicate id or hash).
	ErrConflict = errors.New("conflict")
)

// Store is the persistence interface. Every method is safe for concurrent
// use. Implementations must make AppendAudit atomic with respect to other
// appenders, including other processes using the same database.
type Store interface {
	// CreateKey inserts a key. ErrConflict if the id or hash exists.
	CreateKey(ctx context.Context, k Key) error
	// PutKey inserts or replaces the key with k.ID (used for the admin key,
	// whose hash changes when the operator changes SANDBOX_API_KEY).
	PutKey(ctx context.Context, k Key) error
	// KeyByHash returns the key whose SHA-256 hash is hash (revoked ones
	// included: the caller checks RevokedAt). ErrNotFound if none.
	KeyByHash(ctx context.Context, hash []byte) (Key, error)
	// KeyByID returns one key. ErrNotFound if none.
	KeyByID(ctx context.Context, id string) (Key, error)
	// ListKeys returns all keys, oldest first.
	ListKeys(ctx context.Context) ([]Key, error)
	// RevokeKey marks a key revoked at at. ErrNotFound if no such key;
	// revoking a revoked key keeps the first revocation time and succeeds.
	RevokeKey(ctx context.Context, id string, at time.Time) (Key, error)

	// AppendAudit appends one record atomically: it reads the last record
	// (ok=false when the stream is empty), calls build to make the new one
	// from it, inserts it, calls beforeCommit (which may fail to abort the
	// append) and commits. Appenders are serialized across processes.
	AppendAudit(ctx context.Context, build func(last AuditRecord, ok bool) (AuditRecord, error), beforeCommit func(AuditRecord) error) (AuditRecord, error)
	// AppendAuditBatch is AppendAudit for several records in one
	// transaction (one commit, one flush to disk): build makes the records
	// (1 to MaxAuditBatch, in seq order) from the last one, beforeCommit
	// gets the batch's last record. All of them are stored or none is.
	// The last record given to build (here and in AppendAudit) carries at
	// least its Seq and Hash, the link the new records chain onto; a store
	// may leave its other fields empty (LastAudit reads a whole record).
	AppendAuditBatch(ctx context.Context, build func(last AuditRecord, ok bool) ([]AuditRecord, error), beforeCommit func(last AuditRecord) error) ([]AuditRecord, error)
	// QueryAudit returns records matching f, ordered by seq (descending when
	// f.Descending), at most f.Limit (capped by MaxAuditPage).
	QueryAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
	// ScanAudit calls fn for every record in seq order until fn returns an
	// error, which ScanAudit returns.
	ScanAudit(ctx context.Context, fn func(AuditRecord) error) error
	// LastAudit returns the record with the highest seq; ErrNotFound if empty.
	LastAudit(ctx context.Context) (AuditRecord, error)
	// FirstAudit returns the record with the lowest seq (1, or the first
	// after the records TrimAudit removed); ErrNotFound if empty.
	FirstAudit(ctx context.Context) (AuditRecord, error)
	// AuditHead returns the store's anchor of the chain (head.go), which
	// AppendAuditBatch and TrimAudit move; ok=false when its row is
	// missing (the schema creates it and sandhold never deletes it).
	AuditHead(ctx context.Context) (h AuditHead, ok bool, err error)
	// TrimAudit removes the oldest records, from (which must be the lowest
	// stored seq, else ErrConflict: another trim came first) through
	// through (below the last record), and appends the records build
	// makes (the archive's anchor) in the same transaction, as
	// AppendAuditBatch does. Appenders are serialized with it.
	TrimAudit(ctx context.Context, from, through int64, build func(last AuditRecord, ok bool) ([]AuditRecord, error)) ([]AuditRecord, error)
	// AuditSize estimates what the stored records take: their count and
	// bytes (each record's fields plus a fixed overhead per row).
	AuditSize(ctx context.Context) (AuditSize, error)
	// AuditHeadGuard reports whether the role the store connects as is
	// kept from deleting or rewinding the anchor AuditHead reads.
	AuditHeadGuard(ctx context.Context) (HeadGuard, error)
	// SharedAudit reports whether other hosts append to the same chain (a
	// cluster's PostgreSQL): each host's data dir then anchors only the
	// part of the chain it saw, from its own first append on.
	SharedAudit() bool

	// GetSetting returns a stored setting. ErrNotFound if absent.
	GetSetting(ctx context.Context, key string) ([]byte, error)
	// PutSetting stores a setting (insert or replace).
	PutSetting(ctx context.Context, key string, value []byte) error

	// PutSandbox inserts or replaces a sandbox record.
	PutSandbox(ctx context.Context, r SandboxRow) error
	// DeleteSandbox removes a sandbox record (absent is not an error).
	DeleteSandbox(ctx context.Context, id string) error
	// ListSandboxes returns every sandbox record of this node (a shared
	// store holds other nodes' records too; see WithNode).
	ListSandboxes(ctx context.Context) ([]SandboxRow, error)

	// HoldNode takes this server's node for h (lease.go): the data dir's
	// lock, and in a cluster the node name's lease for ttl, renewed by the
	// Lease. ErrNodeHeld, saying who holds it, while another live server
	// does. A server calls it before it touches any sandbox record.
	HoldNode(ctx context.Context, h Holder, ttl time.Duration) (Lease, error)
	// Cluster is what the nodes sharing this store share (cluster.go);
	// nil on one host.
	Cluster() Cluster
	// FlushWindows opens a flush window on this store (flushwindow.go), for
	// a caller whose audit log commits to this same store; nil when the
	// store has none.
	FlushWindows() func(context.Context) (context.Context, func())

	// Close releases the database.
	Close() error
}

// Key is an API key as stored: never the key itself, only its SHA-256.
type Key struct {
	ID        string
	Name      string
	Role      string
	Hash      []byte // SHA-256 of the full key text
	CreatedAt time.Time
	// RevokedAt is zero for an active key.
	RevokedAt time.Time
	// RateLimits are the key's own rate limits in the syntax of
	// SANDBOX_RATE_LIMITS (ratelimit.ParseKeyRules); "" for none.
	RateLimits string
}

// Revoked reports whether the key has been revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

// AuditRecord is one stored audit record. Time is kept with nanosecond
// precision in UTC; Detail is the canonical JSON the hash was computed over,
// stored byte for byte.
type AuditRecord struct {
	Seq        int64
	Time       time.Time
	Actor      string
	Role       string
	ClientAddr string
	Action     string
	Target     string
	Sandbox    string
	Verdict    string
	Detail     []byte
	PrevHash   string
	Hash       string
}

// AuditSize is what the stored audit records take (AuditSize).
type AuditSize struct {
	Records int64
	// Bytes is an estimate: the records times the mean size of the newest
	// ones (auditSizeSample), each its fields plus auditRowOverhead.
	Bytes int64
}

// auditSizeSample is how many of the newest records AuditSize measures to
// estimate the mean record; auditRowOverhead is what a row costs beyond
// its fields (row header, seq and time, the index entries), measured on
// SQLite's file.
const (
	auditSizeSample  = 1000
	auditRowOverhead = 160
)

// MaxAuditBatch caps the records of one AppendAuditBatch: it bounds the
// transaction's size and the statement parameters a batch sends.
const MaxAuditBatch = 256

// MaxAuditPage caps one QueryAudit answer so that a client cannot make the
// server materialize the whole log in memory.
const MaxAuditPage = 1000

// AuditFilter selects audit records. Zero fields do not filter.
type AuditFilter struct {
	Since    time.Time // records at or after this time
	AfterSeq int64     // records with seq > AfterSeq
	Actor    string    // exact key id
	// Action matches exactly, or as a dotted prefix: "auth" matches
	// "auth.failure" and "auth.success", not "authz.x".
	Action string
	// Actions, when set, is a list of such actions or prefixes, any of
	// which matches (a category spanning several prefixes).
	Actions []string
	// Except leaves out records of these exact actions (an operator's
	// view without the console's own polling reads).
	Except     []string
	Sandbox    string
	Limit      int // 0 or > MaxAuditPage means MaxAuditPage
	Descending bool
}

// OpenConfigured opens the store the configuration names: PostgreSQL when
// databaseURL is set (SANDBOX_DATABASE_URL), else the embedded SQLite
// database in dataDir. Errors never carry the URL's password.
// node names this node's sandbox records in a shared store.
func OpenConfigured(ctx context.Context, dataDir, databaseURL, node string) (Store, error) {
	if databaseURL == "" {
		return Open(ctx, dataDir)
	}
	if !IsPostgresURL(databaseURL) {
		return nil, errors.New("open store: SANDBOX_DATABASE_URL must be a postgres:// URL")
	}
	if node == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, errors.New("open store: SANDBOX_NODE_NAME is unset and the host has no name")
		}
		node = h
	}
	return OpenPostgres(ctx, databaseURL, WithNode(node), WithDataDir(dataDir))
}
