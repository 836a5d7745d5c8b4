// Package audit is sandhold's tamper-evident record of security decisions:
// an append-only, hash-chained stream of records in the store, whose head
// (last seq and hash) is anchored in two places apart from the records: the
// store's audit_head row and the head file <datadir>/audit.head.
//
// It stops silent after-the-fact editing of the record: changing, deleting,
// reordering or truncating records breaks the chain and Verify names the first
// bad seq, and emptying the records (with one of the anchors) leaves the
// other anchor naming the lost end. (Someone who can rewrite the records
// and both anchors, recomputing every hash, is not stopped; ship records
// off-host for that. SECURITY.md says what each kind of access can do.)
//
// # Canonical encoding
//
// Record n's hash is the lowercase hex SHA-256 of the UTF-8 JSON text
//
//	{"v":1,"seq":n,"time":T,"actor":A,"role":R,"client_addr":C,"action":X,
//	 "target":G,"sandbox":S,"verdict":V,"detail":D,"prev_hash":P}
//
// with the keys in exactly this order and no insignificant whitespace, as
// produced by encoding/json: strings use its escaping (including its HTML
// escapes), T is the record time in UTC formatted with time.RFC3339Nano, D is
// the detail object as stored (encoding/json of a map, so keys sorted; "{}"
// when empty), and P is the previous record's hash, or 64 zeros for seq 1.
// Every string is passed through redact before it is hashed or written, and
// is valid UTF-8 (an invalid byte is stored as U+FFFD, which is also what
// the encoding always hashed), so the API returns each string exactly.
//
// # Anchors
//
// The store's anchor (store.AuditHead) moves inside the append
// transaction, only while it names the last record. The head file holds
// "<seq> <hash>\n" of the last record this data dir saw appended, seq
// zero-padded to 20 digits so the record is always 86 bytes. It is
// rewritten after each append transaction commits, while the appender
// still holds the lock file audit.lock (so appenders in several processes
// update it in seq order), and only while it names a stored record: after a
// truncation it stays put, so later appends cannot hide the gap. On SQLite
// it is created with the first record; on a cluster's shared store
// (store.SharedAudit) each node's data dir starts its own at its first
// append and anchors the chain up to there.
//
// The head is rewritten in place with one 86-byte pwrite rather than a temp
// file and rename: on ext4 a rename over an existing file forces the new
// file's data out (auto_da_alloc), which measured 0.9-1.6 ms per append on
// this project's machines against about 2 µs for the pwrite. An 86-byte
// write at offset 0 lies in one disk sector, so a crash leaves the old or
// the new head, not a mix; a reader that races a writer in another process
// and sees a torn value re-reads it.
//
// Durability: Append returns only after the transaction holding the record
// committed, and a commit is durable (SQLite's WAL with synchronous=FULL
// syncs, with fdatasync, at every commit; PostgreSQL's default
// synchronous_commit). Appends that arrive together share one
// transaction, so one flush (group.go). The
// head file is written after the commit and not fsynced: a crash or power
// loss can leave it behind the records (Verify accepts a head that names a
// stored record, and the next append moves it on), never ahead of them, so
// a crash does not look like a truncation.
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandhold/sandhold/internal/redact"
	"github.com/sandhold/sandhold/internal/store"
)

// HeadFile is the name of the head file in the data dir.
const HeadFile = "audit.head"

// LockFile is the name of the lock file in the data dir that appenders in
// every process hold while they append a batch and move the head file.
const LockFile = "audit.lock"

// GenesisHash is the prev_hash of the first record.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Caps on what one record may hold, so a hostile value (a huge command line,
// a giant target path) cannot bloat the log.
const (
	maxFieldLen  = 1024     // any single string field, in bytes
	maxDetailLen = 16 << 10 // the encoded detail object
)

// Verdicts used across packages.
const (
	Allow = "allow"
	Deny  = "deny"
	Error = "error"
)

// Entry is what a caller records. Actor is the key id ("" for anonymous),
// Action is "category.verb" (auth.success, key.create, exec.run, ...).
type Entry struct {
	Actor      string
	Role       string
	ClientAddr string
	Action     string
	Target     string
	Sandbox    string
	Verdict    string
	Detail     map[string]any
}

// Record is a stored, chained entry.
type Record struct {
	Seq        int64          `json:"seq"`
	Time       time.Time      `json:"time"`
	Actor      string         `json:"actor"`
	Role       string         `json:"role"`
	ClientAddr string         `json:"client_addr"`
	Action     string         `json:"action"`
	Target     string         `json:"target"`
	Sandbox    string         `json:"sandbox"`
	Verdict    string         `json:"verdict"`
	Detail     map[string]any `json:"detail"`
	PrevHash   string         `json:"prev_hash"`
	Hash       string         `json:"hash"`
}

// Appender is the one method other packages need; take it instead of *Log.
type Appender interface {
	Append(ctx context.Context, e Entry) (Record, error)
}

// Log is the audit log over a store.
type Log struct {
	st       store.Store
	headPath string
	// shared is st.SharedAudit(): the head file anchors the part of the
	// chain this data dir saw, and is started at its first append.
	shared bool
	now    func() time.Time

	// The group commit (group.go).
	maxBatch, maxPending int
	postedDelay          time.Duration
	reportFn             func(error)
	// Archive segment bounds (archive.go).
	minSeg, maxSeg int64
	group          group
	stats          groupStats

	// mu is held by the one batch committing and by Verify: this process
	// writes the head file in seq order (other processes are serialized by
	// the store's transaction).
	mu sync.Mutex
	// lockF and headF are the data dir's lock and head files, kept open
	// between batches (keptfile.go). Guarded by mu.
	lockF, headF keptFile
}

var _ Appender = (*Log)(nil)

// Option configures a Log.
type Option func(*Log)

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(l *Log) { l.now = now } }

// New returns the log over st, keeping the head file in dataDir.
func New(st store.Store, dataDir string, opts ...Option) *Log {
	l := &Log{st: st, headPath: filepath.Join(dataDir, HeadFile), shared: st.SharedAudit(), now: time.Now,
		maxBatch: DefaultMaxBatch, maxPending: DefaultMaxPending, postedDelay: DefaultPostedDelay,
		minSeg: minSegment, maxSeg: maxSegment}
	l.group.settled = sync.NewCond(&l.group.mu)
	l.headF.path = l.headPath
	l.lockF.path = filepath.Join(dataDir, LockFile)
	for _, o := range opts {
		o(l)
	}
	l.group.slots = make(chan struct{}, l.maxPending)
	return l
}

// HeadPath returns the head file's path.
func (l *Log) HeadPath() string { return l.headPath }

// Close commits the posted records still waiting (Flush) and releases the
// lock and head files the log keeps open between batches. It does not
// close the store. The log stays usable: a later append or verify opens
// the files again.
func (l *Log) Close() error {
	l.Flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lockF.close()
	l.headF.close()
	return nil
}

// Append redacts, chains and stores e, and returns once the transaction
// holding it has committed (durably: see store). Concurrent appends share
// one transaction (group.go). An error means e was not stored.
func (l *Log) Append(ctx context.Context, e Entry) (Record, error) {
	r, err := l.appendEntry(ctx, e, false)
	if err != nil {
		return Record{}, err
	}
	return fromStore(r), nil
}

// Write is Append for a caller that does not read the stored record back
// (the dispatcher: one record per call, before the answer): the same
// durable append, without decoding the record's detail into a map again.
func (l *Log) Write(ctx context.Context, e Entry) error {
	_, err := l.appendEntry(ctx, e, false)
	return err
}

// reserved reports an entry only sandhold itself writes (an archive's
// anchor, RoleSystem): Append refuses it, so no caller can plant one.
func reserved(e Entry) bool {
	return e.Role == RoleSystem || e.Action == ActionArchive || strings.HasPrefix(e.Action, ActionArchive+".")
}

// Begin appends e like Write, but returns at once: the record rides the
// next commit, and Pending.Wait leads one if none comes first. The
// dispatcher begins the record of a call that starts a command with it, so
// the command can be sent to the init and held there until the record is
// durable (dispatch, "Record first"). The caller must Wait (a timer
// commits a record never waited for after postedDelay). An error here
// means e was refused before it was queued (an invalid entry, ctx ended
// while the queue was full).
func (l *Log) Begin(ctx context.Context, e Entry) (*Pending, error) {
	p, err := l.newPending(ctx, e, false, begun)
	if err != nil {
		return nil, err
	}
	p.begun = &Pending{done: make(chan struct{}), l: l, p: p}
	p.lead = make(chan struct{}, 1)
	if _, arm := l.group.enqueue(p); arm {
		time.AfterFunc(l.postedDelay, l.commitPosted)
	}
	return p.begun, nil
}

// Post appends e to ride the next commit and returns without waiting for
// it (group.go): the dispatcher records a command's outcome with it after
// the call's own record was made durable before the command started. If
// no commit comes, one starts after postedDelay. A record that cannot be
// stored then is reported (WithReport); the error here means it was
// refused before it was queued.
func (l *Log) Post(ctx context.Context, e Entry) error {
	p, err := l.newPending(ctx, e, false, posted)
	if err != nil {
		return err
	}
	if _, arm := l.group.enqueue(p); arm {
		time.AfterFunc(l.postedDelay, l.commitPosted)
	}
	return nil
}

// Pending is a record appended with Begin.
type Pending struct {
	l    *Log
	p    *pending
	done chan struct{}
	// mu guards fns; seq and err are set before done is closed.
	mu  sync.Mutex
	fns []func(error)
	seq int64
	err error
}

// Done is closed once the record is durable or could not be stored.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait returns once the record is durable, with its seq, or with the
// error that kept it from being stored. With no commit under way it
// commits the record itself, on the calling goroutine; else it waits for
// the commit that takes it, or leads the next. It returns within the
// commits' own bound (batchTimeout).
func (p *Pending) Wait() (int64, error) {
	select {
	case <-p.done:
	default:
		p.l.drive(p.p)
	}
	return p.seq, p.err
}

// OnDurable has f called once the record is durable (nil) or could not be
// stored: at once if that is known, else on the goroutine that committed
// it, right after its commit and before any other append of the batch is
// answered. f must not block.
func (p *Pending) OnDurable(f func(error)) {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		f(p.err)
		return
	default:
	}
	p.fns = append(p.fns, f)
	p.mu.Unlock()
}

func (p *Pending) settle(o outcome) {
	p.mu.Lock()
	p.seq, p.err = o.rec.Seq, o.err
	close(p.done)
	fns := p.fns
	p.fns = nil
	p.mu.Unlock()
	for _, f := range fns {
		f(o.err)
	}
}

// newPending checks, redacts and encodes e and takes a place in the queue's
// bound for it (waiting for one while ctx lasts).
func (l *Log) newPending(ctx context.Context, e Entry, system bool, kind pendingKind) (*pending, error) {
	if e.Action == "" {
		return nil, errors.New("audit: empty action")
	}
	if reserved(e) != system {
		return nil, fmt.Errorf("audit: action %q with role %q is reserved to sandhold's own records", e.Action, e.Role)
	}
	detail, err := encodeDetail(e.Detail)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	select {
	case l.group.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("audit: %w", ctx.Err())
	}
	p := &pending{kind: kind, rec: store.AuditRecord{
		Actor:      clean(e.Actor),
		Role:       clean(e.Role),
		ClientAddr: clean(e.ClientAddr),
		Action:     clean(e.Action),
		Target:     clean(e.Target),
		Sandbox:    clean(e.Sandbox),
		Verdict:    clean(e.Verdict),
		Detail:     detail,
	}}
	if kind == waiter {
		p.done = make(chan outcome, 1)
	}
	return p, nil
}

// appendEntry stores e (see Append) and returns the stored record; system
// is set by retention's own records.
func (l *Log) appendEntry(ctx context.Context, e Entry, system bool) (store.AuditRecord, error) {
	p, err := l.newPending(ctx, e, system, waiter)
	if err != nil {
		return store.AuditRecord{}, err
	}
	defer func() { <-l.group.slots }()
	var o outcome
	if lead, _ := l.group.enqueue(p); lead {
		o = l.lead(ctx, p)
	} else if o = l.await(ctx, p); o.lead {
		o = l.lead(ctx, p)
	}
	if o.err != nil {
		return store.AuditRecord{}, o.err
	}
	return o.rec, nil
}

// headAgrees reports whether the head file may move on from last: it
// names the store's last record (or neither exists), or a stored record
// before it (a crash came between a batch's commit and its head write; on a
// shared store, other nodes appended since), or one the store no longer
// holds because it was archived. With no head file it may start only on an
// empty chain, or on a shared store (this node's first append). False when
// the file is malformed or names a record that is not stored.
func (l *Log) headAgrees(ctx context.Context, last store.AuditRecord, ok bool) (bool, error) {
	hd, have, err := l.readHead()
	switch {
	case err != nil && !errors.Is(err, errMalformedHead):
		return false, err
	case err != nil:
		return false, nil
	case !have:
		return !ok || l.shared, nil
	case !ok:
		return false, nil // the file names a record; the store has none
	case hd.seq == last.Seq:
		return hd.hash == last.Hash, nil
	case hd.seq > last.Seq:
		return false, nil // records were cut off the end
	}
	recs, err := l.st.QueryAudit(ctx, store.AuditFilter{AfterSeq: hd.seq - 1, Limit: 1})
	if err != nil {
		return false, fmt.Errorf("read sealed record %d: %w", hd.seq, err)
	}
	if len(recs) == 1 && recs[0].Seq == hd.seq {
		return recs[0].Hash == hd.hash, nil
	}
	// Not stored: archived (every stored record is after it) or deleted.
	first, err := l.st.FirstAudit(ctx)
	if err != nil {
		return false, fmt.Errorf("read first record: %w", err)
	}
	return first.Seq > hd.seq, nil
}

// clean redacts and caps a field.
func clean(s string) string {
	s = strings.ToValidUTF8(redact.String(s), "\uFFFD")
	if len(s) > maxFieldLen {
		s = strings.ToValidUTF8(s[:maxFieldLen], "") + "…"
	}
	return s
}

func encodeDetail(d map[string]any) ([]byte, error) {
	if len(d) == 0 {
		return []byte("{}"), nil
	}
	red, _ := redact.Value(d).(map[string]any)
	b, err := json.Marshal(red)
	if err != nil {
		return nil, fmt.Errorf("encode detail: %w", err)
	}
	if len(b) > maxDetailLen {
		b, _ = json.Marshal(map[string]any{"truncated": true, "bytes": len(b)})
	}
	return b, nil
}

// canonical is the hashed form; field order is the encoding's key order.
type canonical struct {
	V          int             `json:"v"`
	Seq        int64           `json:"seq"`
	Time       string          `json:"time"`
	Actor      string          `json:"actor"`
	Role       string          `json:"role"`
	ClientAddr string          `json:"client_addr"`
	Action     string          `json:"action"`
	Target     string          `json:"target"`
	Sandbox    string          `json:"sandbox"`
	Verdict    string          `json:"verdict"`
	Detail     json.RawMessage `json:"detail"`
	PrevHash   string          `json:"prev_hash"`
}

// HashOf computes a record's hash per the canonical encoding (package doc).
func HashOf(r store.AuditRecord) (string, error) {
	detail := r.Detail
	if len(detail) == 0 {
		detail = []byte("{}")
	}
	b, err := json.Marshal(canonical{
		V: 1, Seq: r.Seq, Time: r.Time.UTC().Format(time.RFC3339Nano),
		Actor: r.Actor, Role: r.Role, ClientAddr: r.ClientAddr, Action: r.Action,
		Target: r.Target, Sandbox: r.Sandbox, Verdict: r.Verdict,
		Detail: detail, PrevHash: r.PrevHash,
	})
	if err != nil {
		return "", fmt.Errorf("encode record %d: %w", r.Seq, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// headLen is the fixed size of the head record: 20 digits, space, 64 hex
// digits, newline.
const headLen = 20 + 1 + 64 + 1

// writeHead rewrites the head file in place (see the package doc). Called
// inside the append transaction, so a failure aborts the append.
func (l *Log) writeHead(r store.AuditRecord) error {
	var b [headLen + 16]byte
	buf := fmt.Appendf(b[:0], "%020d %s\n", r.Seq, r.Hash)
	if len(buf) != headLen {
		return fmt.Errorf("write audit head: record %d has a malformed hash", r.Seq)
	}
	if err := l.headF.writeHeadAt(buf); err != nil {
		l.headF.close() // the next batch opens the path afresh
		return fmt.Errorf("write audit head: %w", err)
	}
	return nil
}

// head is the parsed head file.
type head struct {
	seq  int64
	hash string
}

// headReadTries: a head that does not parse is re-read this many times in
// case it raced an in-place rewrite by another process.
const headReadTries = 3

// readHead reads the head file.
func (l *Log) readHead() (head, bool, error) {
	var (
		h    head
		have bool
		err  error
	)
	for range headReadTries {
		if h, have, err = l.readHeadOnce(); !errors.Is(err, errMalformedHead) {
			break
		}
	}
	return h, have, err
}

func (l *Log) readHeadOnce() (head, bool, error) {
	b, have, err := l.headF.readAll()
	if errors.Is(err, errMalformedHead) {
		return head{}, true, err
	}
	if err != nil {
		l.headF.close()
		return head{}, false, fmt.Errorf("read audit head: %w", err)
	}
	if !have {
		return head{}, false, nil
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return head{}, true, errMalformedHead
	}
	seq, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || seq < 1 || len(f[1]) != 64 {
		return head{}, true, errMalformedHead
	}
	return head{seq: seq, hash: f[1]}, true, nil
}

// errMalformedHead is reported as a verification failure, not an I/O error.
var errMalformedHead = errors.New("malformed head file")

func fromStore(r store.AuditRecord) Record {
	var d map[string]any
	if len(r.Detail) > 0 {
		if err := json.Unmarshal(r.Detail, &d); err != nil {
			d = map[string]any{"undecodable": true}
		}
	}
	if d == nil {
		d = map[string]any{}
	}
	return Record{
		Seq: r.Seq, Time: r.Time, Actor: r.Actor, Role: r.Role, ClientAddr: r.ClientAddr,
		Action: r.Action, Target: r.Target, Sandbox: r.Sandbox, Verdict: r.Verdict,
		Detail: d, PrevHash: r.PrevHash, Hash: r.Hash,
	}
}
