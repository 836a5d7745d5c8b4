package audit

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// Retention (SANDBOX_AUDIT_RETENTION) bounds what the audit keeps on this
// host. The oldest stored records move, a segment at a time, into archive
// files in <datadir>/audit-archive; the transaction that removes them from
// the store appends an anchor record to the chain (ActionArchive) naming
// the last archived record, its hash and the file's SHA-256. The stored
// chain then starts after that record, and Verify proves it from the
// anchor: removing records without an anchor that names them exactly, or
// forging one, breaks the chain as any other edit does, since the anchor is
// itself a chained record.
//
// An archive is written whole before the store forgets its records: a temp
// file, fsync, rename to its final name, fsync of the directory, and only
// then the transaction. A crash before the commit leaves a file whose
// records are still stored (removed by the next round, which writes them
// again); a crash after leaves both. So no record is ever only in memory.

// ActionArchive is the action of an archive's anchor record, and
// ActionArchiveDrop of the record that says an archive file was deleted to
// keep the budget. Both are written by retention only, with RoleSystem;
// Append refuses them (and RoleSystem) to everyone else, so a caller cannot
// plant an anchor.
const (
	ActionArchive     = "audit.archive"
	ActionArchiveDrop = "audit.archive.drop"
	// RoleSystem is the role of records sandhold writes on its own behalf.
	RoleSystem = "system"
)

// ArchiveDir is the archive directory in the data dir.
const ArchiveDir = "audit-archive"

// Retention is what the audit keeps. Zero fields do not bound.
type Retention struct {
	// MaxAge: stored records older than this are archived.
	MaxAge time.Duration
	// Budget is the bytes the audit may take on this host: the stored
	// records (as store.AuditSize estimates them) and the archive files
	// together. Stored records beyond half of it are archived (oldest
	// first), and the oldest archives are deleted while the two together
	// exceed it.
	Budget int64
}

// Segment bounds of one archive: at most maxSegment records, and no
// smaller than minSegment unless age asks for fewer (so a log just over
// its budget is not cut into tiny files). maxSegment also bounds how long
// a round's transaction holds the appends back (deleting 10,000 records
// and their index entries). WithSegments changes them.
const (
	maxSegment = 10000
	minSegment = 1000
	// sizeSlack: the budget's stored half is trimmed to this share of it,
	// so the next rounds do not archive a few records each.
	sizeSlack = 0.9
)

// WithSegments sets the smallest and largest archive segment (tests).
func WithSegments(minRecords, maxRecords int64) Option {
	return func(l *Log) { l.minSeg, l.maxSeg = max(minRecords, 1), max(maxRecords, 1) }
}

// ArchiveAnchor is the detail of an ActionArchive record.
type ArchiveAnchor struct {
	From        int64  `json:"from"`
	Through     int64  `json:"through"`
	ThroughHash string `json:"through_hash"`
	Records     int64  `json:"records"`
	File        string `json:"file"`
	SHA256      string `json:"sha256"`
	Bytes       int64  `json:"bytes"`
	// Reason is "age" or "size".
	Reason string `json:"reason"`
}

// RetainResult is what one round of Retain did.
type RetainResult struct {
	Archived *ArchiveAnchor `json:"archived,omitempty"`
	// Dropped are archive files deleted to keep the budget.
	Dropped []string `json:"dropped,omitempty"`
}

// archiveName is the file name of records from..through.
func archiveName(from, through int64) string {
	return fmt.Sprintf("%020d-%020d.jsonl.gz", from, through)
}

// parseArchiveName reads an archive's range from its name.
func parseArchiveName(name string) (from, through int64, ok bool) {
	if _, err := fmt.Sscanf(name, "%020d-%020d.jsonl.gz", &from, &through); err != nil || archiveName(from, through) != name {
		return 0, 0, false
	}
	return from, through, from >= 1 && through >= from
}

// archiveLine is one record in an archive: the stored record, every field
// (the detail as its stored JSON), so HashOf can check it again.
type archiveLine struct {
	Seq        int64           `json:"seq"`
	Time       time.Time       `json:"time"`
	Actor      string          `json:"actor"`
	Role       string          `json:"role"`
	ClientAddr string          `json:"client_addr"`
	Action     string          `json:"action"`
	Target     string          `json:"target"`
	Sandbox    string          `json:"sandbox"`
	Verdict    string          `json:"verdict"`
	Detail     json.RawMessage `json:"detail"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`
}

func (a archiveLine) record() store.AuditRecord {
	return store.AuditRecord{Seq: a.Seq, Time: a.Time, Actor: a.Actor, Role: a.Role, ClientAddr: a.ClientAddr,
		Action: a.Action, Target: a.Target, Sandbox: a.Sandbox, Verdict: a.Verdict, Detail: a.Detail,
		PrevHash: a.PrevHash, Hash: a.Hash}
}

func lineOf(r store.AuditRecord) archiveLine {
	d := r.Detail
	if len(d) == 0 {
		d = []byte("{}")
	}
	return archiveLine{Seq: r.Seq, Time: r.Time, Actor: r.Actor, Role: r.Role, ClientAddr: r.ClientAddr,
		Action: r.Action, Target: r.Target, Sandbox: r.Sandbox, Verdict: r.Verdict, Detail: d,
		PrevHash: r.PrevHash, Hash: r.Hash}
}

// Retain runs one round of retention: it removes what a crashed round left,
// archives one segment of the oldest records if the policy asks for it,
// and deletes the oldest archives beyond the budget. The daemon calls it
// periodically; a round that archived a full segment may be followed at
// once by another.
func (l *Log) Retain(ctx context.Context, p Retention) (RetainResult, error) {
	var res RetainResult
	dir := filepath.Join(filepath.Dir(l.headPath), ArchiveDir)
	first, err := l.st.FirstAudit(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("audit retention: %w", err)
	}
	if err := removeUncommitted(dir, first.Seq); err != nil {
		return res, fmt.Errorf("audit retention: %w", err)
	}
	n, reason, err := l.segment(ctx, p, first)
	if err != nil {
		return res, fmt.Errorf("audit retention: %w", err)
	}
	if n > 0 {
		a, err := l.archive(ctx, dir, first.Seq, first.Seq+n-1, reason)
		if err != nil {
			return res, fmt.Errorf("audit retention: %w", err)
		}
		res.Archived = &a
	}
	if p.Budget > 0 {
		sz, err := l.st.AuditSize(ctx)
		if err != nil {
			return res, fmt.Errorf("audit retention: %w", err)
		}
		if res.Dropped, err = l.dropOldArchives(ctx, dir, p.Budget-sz.Bytes); err != nil {
			return res, fmt.Errorf("audit retention: %w", err)
		}
	}
	return res, nil
}

// segment decides how many of the oldest records (from first) to archive,
// and why.
func (l *Log) segment(ctx context.Context, p Retention, first store.AuditRecord) (int64, string, error) {
	last, err := l.st.LastAudit(ctx)
	if err != nil {
		return 0, "", err
	}
	// The last record stays stored: the chain's end is never archived.
	avail := last.Seq - first.Seq
	var n int64
	reason := ""
	if p.Budget > 0 {
		sz, err := l.st.AuditSize(ctx)
		if err != nil {
			return 0, "", err
		}
		allow := p.Budget / 2
		if sz.Records > 0 && sz.Bytes > allow {
			mean := max(sz.Bytes/sz.Records, 1)
			keep := int64(float64(allow)*sizeSlack) / mean
			if over := sz.Records - keep; over >= l.minSeg || keep <= 0 {
				n, reason = over, "size"
			}
		}
	}
	if p.MaxAge > 0 && n < l.maxSeg {
		old, err := l.olderThan(ctx, first.Seq, l.now().Add(-p.MaxAge), min(avail, l.maxSeg))
		if err != nil {
			return 0, "", err
		}
		if old > n {
			n, reason = old, "age"
		}
	}
	return min(n, avail, l.maxSeg), reason, nil
}

// olderThan counts the records from seq on that are older than cutoff, up
// to the first that is not (the clock's order is the seq order but for
// small steps back; those stay for the next round).
func (l *Log) olderThan(ctx context.Context, from int64, cutoff time.Time, limit int64) (int64, error) {
	var n int64
	after := from - 1
	for n < limit {
		recs, err := l.st.QueryAudit(ctx, store.AuditFilter{AfterSeq: after, Limit: store.MaxAuditPage})
		if err != nil {
			return 0, err
		}
		for _, r := range recs {
			if !r.Time.Before(cutoff) || n >= limit {
				return n, nil
			}
			n++
		}
		if len(recs) < store.MaxAuditPage {
			return n, nil
		}
		after = recs[len(recs)-1].Seq
	}
	return n, nil
}

// archive writes records from..through to their file, then removes them
// from the store with the anchor appended in the same transaction.
func (l *Log) archive(ctx context.Context, dir string, from, through int64, reason string) (ArchiveAnchor, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ArchiveAnchor{}, err
	}
	name := archiveName(from, through)
	path := filepath.Join(dir, name)
	sum, size, lastRec, err := l.writeArchive(ctx, dir, path, from, through)
	if err != nil {
		return ArchiveAnchor{}, err
	}
	a := ArchiveAnchor{From: from, Through: through, ThroughHash: lastRec.Hash, Records: through - from + 1,
		File: name, SHA256: sum, Bytes: size, Reason: reason}
	if err := l.trim(ctx, a); err != nil {
		// The records stay stored; so must no file claim them.
		_ = os.Remove(path)
		_ = syncDir(dir)
		return ArchiveAnchor{}, err
	}
	return a, nil
}

// writeArchive writes records from..through, checking that they chain,
// to path atomically and durably, and returns its SHA-256, size and the
// last record.
func (l *Log) writeArchive(ctx context.Context, dir, path string, from, through int64) (string, int64, store.AuditRecord, error) {
	f, err := os.CreateTemp(dir, ".archive-*.tmp")
	if err != nil {
		return "", 0, store.AuditRecord{}, err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // after the rename: nothing left to remove
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(cw, 64<<10)
	zw := gzip.NewWriter(bw)
	enc := json.NewEncoder(zw)
	var last store.AuditRecord
	prev := ""
	after := from - 1
	for after < through {
		recs, err := l.st.QueryAudit(ctx, store.AuditFilter{AfterSeq: after, Limit: int(min(through-after, store.MaxAuditPage))})
		if err != nil {
			_ = f.Close()
			return "", 0, last, err
		}
		if len(recs) == 0 {
			_ = f.Close()
			return "", 0, last, fmt.Errorf("records %d..%d are not all stored", after+1, through)
		}
		for _, r := range recs {
			// Only an intact chain is archived: an edit must stay
			// where Verify finds it, not move into a file.
			if hh, err := HashOf(r); err != nil || hh != r.Hash || r.Seq != after+1 || (prev != "" && r.PrevHash != prev) {
				_ = f.Close()
				return "", 0, last, fmt.Errorf("record %d does not verify; nothing is archived until `sandhold audit verify` passes", r.Seq)
			}
			if err := enc.Encode(lineOf(r)); err != nil {
				_ = f.Close()
				return "", 0, last, err
			}
			after, prev, last = r.Seq, r.Hash, r
		}
	}
	err = zw.Close()
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return "", 0, last, fmt.Errorf("write archive: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), cw.n, last, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// trim removes a's records from the store and appends its anchor in one
// transaction, then moves the head file, as a batch's commit does.
func (l *Log) trim(ctx context.Context, a ArchiveAnchor) error {
	detail, err := json.Marshal(a)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	unlock, err := l.lockF.lock()
	if err != nil {
		return err
	}
	defer unlock()
	rec := store.AuditRecord{Role: RoleSystem, Action: ActionArchive, Target: a.File, Verdict: Allow, Detail: detail}
	sealHead := false
	recs, err := l.st.TrimAudit(ctx, a.From, a.Through, func(last store.AuditRecord, ok bool) ([]store.AuditRecord, error) {
		var err error
		if sealHead, err = l.headAgrees(ctx, last, ok); err != nil {
			return nil, err
		}
		return l.chain([]store.AuditRecord{rec}, last, ok)
	})
	if err != nil {
		return err
	}
	if sealHead {
		return l.writeHead(recs[len(recs)-1])
	}
	return nil
}

// dropOldArchives deletes the oldest archive files while all of them take
// more than allow bytes, each deletion recorded (ActionArchiveDrop).
func (l *Log) dropOldArchives(ctx context.Context, dir string, allow int64) ([]string, error) {
	files, total, err := listArchives(dir)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, f := range files {
		if total <= allow {
			break
		}
		if err := l.appendSystem(ctx, ActionArchiveDrop, f.name, map[string]any{"from": f.from, "through": f.through, "bytes": f.size}); err != nil {
			return dropped, err
		}
		if err := os.Remove(filepath.Join(dir, f.name)); err != nil {
			return dropped, err
		}
		total -= f.size
		dropped = append(dropped, f.name)
	}
	if len(dropped) > 0 {
		return dropped, syncDir(dir)
	}
	return dropped, nil
}

// appendSystem appends a record of sandhold's own (RoleSystem).
func (l *Log) appendSystem(ctx context.Context, action, target string, detail map[string]any) error {
	_, err := l.appendEntry(ctx, Entry{Role: RoleSystem, Action: action, Target: target, Verdict: Allow, Detail: detail}, true)
	return err
}

// archiveFile is one file of the archive directory.
type archiveFile struct {
	name          string
	from, through int64
	size          int64
}

// listArchives returns the archive files, oldest first, and their bytes.
func listArchives(dir string) ([]archiveFile, int64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var out []archiveFile
	var total int64
	for _, e := range ents {
		from, through, ok := parseArchiveName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, archiveFile{name: e.Name(), from: from, through: through, size: fi.Size()})
		total += fi.Size()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out, total, nil
}

// ArchiveBytes is what the archive files in dataDir take.
func ArchiveBytes(dataDir string) (int64, error) {
	_, total, err := listArchives(filepath.Join(dataDir, ArchiveDir))
	return total, err
}

// removeUncommitted deletes what a round that did not commit left in dir:
// temp files, and archives of records that are still stored (their
// through is at or after the first stored seq).
func removeUncommitted(dir string, firstStored int64) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	removed := false
	for _, e := range ents {
		name := e.Name()
		_, through, ok := parseArchiveName(name)
		stale := (strings.HasPrefix(name, ".archive-") && strings.HasSuffix(name, ".tmp")) || (ok && through >= firstStored)
		if !stale {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// syncDir makes a directory's entries (a rename, a removal) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir) // #nosec G304 -- the data dir's archive directory
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ArchiveCheck is the outcome of VerifyArchives.
type ArchiveCheck struct {
	OK bool `json:"ok"`
	// Files and Records are the archive files read and the records they
	// hold; From is the first archived record found (1 when none was
	// dropped or moved away).
	Files   int    `json:"files"`
	Records int64  `json:"records"`
	From    int64  `json:"from,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// VerifyArchives checks the archive files of this data dir, newest first:
// each is named by an anchor (in the stored chain or a later archive) with
// its SHA-256, holds an intact chain that ends on the anchor's record and
// hash, and the files follow one another up to the stored chain's first
// record. Files dropped for the budget (or moved off the host) may be
// missing at the start; a gap between files is a problem. Verify checks
// the stored chain.
func (l *Log) VerifyArchives(ctx context.Context) (ArchiveCheck, error) {
	dir := filepath.Join(filepath.Dir(l.headPath), ArchiveDir)
	files, _, err := listArchives(dir)
	if err != nil {
		return ArchiveCheck{}, err
	}
	anchors := map[string]ArchiveAnchor{}
	collect := func(r store.AuditRecord) {
		if a, ok := archiveAnchorOf(r); ok {
			anchors[a.File] = a
		}
	}
	if err := l.st.ScanAudit(ctx, func(r store.AuditRecord) error { collect(r); return nil }); err != nil {
		return ArchiveCheck{}, err
	}
	var res ArchiveCheck
	// next is the first record after the file being checked: the stored
	// chain's first, then each checked file's first.
	next, err := l.st.FirstAudit(ctx)
	if errors.Is(err, store.ErrNotFound) {
		next = store.AuditRecord{}
	} else if err != nil {
		return ArchiveCheck{}, err
	}
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		path := filepath.Join(dir, f.name)
		bad := func(format string, args ...any) (ArchiveCheck, error) {
			res.Problem = fmt.Sprintf("archive "+f.name+": "+format, args...)
			return res, nil
		}
		a, ok := anchors[f.name]
		if !ok {
			return bad("named by no anchor in the chain")
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return ArchiveCheck{}, err
		}
		if sum != a.SHA256 {
			return bad("was changed (its SHA-256 is not the anchor's)")
		}
		if next.Seq != 0 && (next.Seq != a.Through+1 || next.PrevHash != a.ThroughHash) {
			return bad("records %d..%d are in no archive file", a.Through+1, next.Seq-1)
		}
		var firstRec store.AuditRecord
		seq, hash := f.from-1, ""
		err = readArchive(path, func(r store.AuditRecord) error {
			h, err := HashOf(r)
			switch {
			case r.Seq != seq+1:
				return fmt.Errorf("record %d is missing", seq+1)
			case err != nil || h != r.Hash:
				return fmt.Errorf("record %d was modified (hash mismatch)", r.Seq)
			case hash != "" && r.PrevHash != hash, r.Seq == 1 && r.PrevHash != GenesisHash:
				return fmt.Errorf("record %d does not link to record %d", r.Seq, seq)
			}
			if hash == "" {
				firstRec = r
			}
			seq, hash = r.Seq, r.Hash
			res.Records++
			collect(r)
			return nil
		})
		if err == nil && (seq != a.Through || hash != a.ThroughHash) {
			err = fmt.Errorf("it ends at record %d, its anchor names %d", seq, a.Through)
		}
		if err != nil {
			return bad("%v", err)
		}
		res.Files++
		res.From, next = f.from, firstRec
	}
	res.OK = true
	return res, nil
}

// maxArchiveLine bounds one line of an archive file (a record: its fields
// are capped at 1 KiB each and its detail at 16 KiB, escaped).
const maxArchiveLine = 1 << 20

// readArchive calls fn for every record of an archive file.
func readArchive(path string, fn func(store.AuditRecord) error) error {
	f, err := os.Open(path) // #nosec G304 -- a file of the data dir's archive directory
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 64<<10), maxArchiveLine)
	for sc.Scan() {
		var a archiveLine
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return fmt.Errorf("undecodable line: %w", err)
		}
		if err := fn(a.record()); err != nil {
			return err
		}
	}
	return sc.Err()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path) // #nosec G304 -- a file of the data dir's archive directory
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
