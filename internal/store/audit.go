package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

const auditColumns = `seq, time_ns, actor, role, client_addr, action, target, sandbox, verdict, detail, prev_hash, hash`

const (
	lastAuditQuery   = `SELECT ` + auditColumns + ` FROM audit ORDER BY seq DESC LIMIT 1`
	insertAuditQuery = `INSERT INTO audit(` + auditColumns + `) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`
	// lastLinkQuery reads what an append chains onto: the last record's
	// seq and hash, not its every column (the detail JSON and six strings
	// were read, converted and dropped on every append).
	lastLinkQuery = `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`
	// moveHeadQuery moves the store's anchor to ?1/?2 only while it names
	// the last record ?3/?4 (0 and '' for an empty chain): the agreement
	// rule of head.go, checked by the statement itself.
	moveHeadQuery   = `UPDATE audit_head SET seq = ?1, hash = ?2 WHERE id = 1 AND seq = ?3 AND hash = ?4`
	firstAuditQuery = `SELECT ` + auditColumns + ` FROM audit ORDER BY seq LIMIT 1`
)

// auditMarkEvery is how many records an audit mark covers: each record
// whose seq is a multiple of it gets a mark, in the transaction that
// appends it (one small row per this many records).
const auditMarkEvery = 1024

// insertAuditMarkQuery marks seq ?1: the latest time of the records after
// the mark before it and up to ?1, and that mark's own (with no mark
// before, every record up to ?1). A mark is so the latest time of every
// record up to its seq, whatever order the clock gave them, and marks
// never decrease with seq.
const insertAuditMarkQuery = `WITH prev AS (SELECT seq, max_time_ns FROM audit_marks WHERE seq < ?1 ORDER BY seq DESC LIMIT 1)
INSERT INTO audit_marks(seq, max_time_ns)
SELECT ?1, COALESCE(MAX(t), 0) FROM (
	SELECT max_time_ns AS t FROM prev
	UNION ALL
	SELECT time_ns FROM audit WHERE seq <= ?1 AND seq > COALESCE((SELECT seq FROM prev), -9223372036854775808)
)`

// auditMarksFill marks a log written before the marks (migration 11), in
// one pass: the running latest time at every auditMarkEvery-th seq (1024,
// written out: TestAuditMarksFillMatchesAppends fails if the two differ).
const auditMarksFill = `
INSERT INTO audit_marks(seq, max_time_ns)
SELECT seq, m FROM (SELECT seq, MAX(time_ns) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS m FROM audit)
WHERE seq % 1024 = 0;`

// auditSinceBound is the seq a query with a since filter starts after:
// the last mark whose latest time is before since. Every record up to it
// is older than since. Marks never decrease with seq, so the newest-first
// walk stops at the first it finds (a recent since reads a few marks).
const auditSinceBound = `(SELECT COALESCE((SELECT seq FROM audit_marks WHERE max_time_ns < ? ORDER BY seq DESC LIMIT 1), -9223372036854775808))`

func scanAudit(row interface{ Scan(...any) error }) (AuditRecord, error) {
	var r AuditRecord
	var ns int64
	if err := row.Scan(&r.Seq, &ns, &r.Actor, &r.Role, &r.ClientAddr, &r.Action, &r.Target, &r.Sandbox,
		&r.Verdict, &r.Detail, &r.PrevHash, &r.Hash); err != nil {
		return AuditRecord{}, err
	}
	r.Time = fromNS(ns)
	return r, nil
}

// oneRecord adapts AppendAudit's build to AppendAuditBatch's.
func oneRecord(build func(last AuditRecord, ok bool) (AuditRecord, error)) func(AuditRecord, bool) ([]AuditRecord, error) {
	return func(last AuditRecord, ok bool) ([]AuditRecord, error) {
		r, err := build(last, ok)
		if err != nil {
			return nil, err
		}
		return []AuditRecord{r}, nil
	}
}

// checkBatch holds a built batch to AppendAuditBatch's contract.
func checkBatch(recs []AuditRecord) error {
	if len(recs) == 0 || len(recs) > MaxAuditBatch {
		return fmt.Errorf("audit batch of %d records (want 1 to %d)", len(recs), MaxAuditBatch)
	}
	for i := range recs {
		if recs[i].Detail == nil {
			recs[i].Detail = []byte{}
		}
	}
	return nil
}

// AppendAudit appends one record inside a write transaction.
func (s *SQLite) AppendAudit(ctx context.Context, build func(last AuditRecord, ok bool) (AuditRecord, error), beforeCommit func(AuditRecord) error) (AuditRecord, error) {
	recs, err := s.AppendAuditBatch(ctx, oneRecord(build), beforeCommit)
	if err != nil {
		return AuditRecord{}, err
	}
	return recs[0], nil
}

// AppendAuditBatch appends records inside one write transaction (BEGIN
// IMMEDIATE, so writers in other processes wait for it): one commit, and
// with synchronous=FULL one sync of the WAL, for the whole batch.
//
// It runs on the store's own audit connection (auditConn) with a context
// that cannot be cancelled, so no watcher goroutines start: the wait for
// the write lock is bounded by busy_timeout, and ctx is checked before the
// commit (a batch whose context ended is rolled back).
func (s *SQLite) AppendAuditBatch(ctx context.Context, build func(last AuditRecord, ok bool) ([]AuditRecord, error), beforeCommit func(last AuditRecord) error) ([]AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append audit: %w", err)
	}
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	a := &s.audit
	if a.conn == nil {
		return nil, fmt.Errorf("append audit: %w", sql.ErrConnDone) // closed
	}
	recs, err := s.appendAuditTx(ctx, a, nil, build, beforeCommit)
	if err != nil {
		return nil, fmt.Errorf("append audit: %w", err)
	}
	return recs, nil
}

// trimRange is the records TrimAudit removes.
type trimRange struct{ from, through int64 }

// TrimAudit removes records from..through and appends build's records in
// one transaction on the audit connection (see Store).
func (s *SQLite) TrimAudit(ctx context.Context, from, through int64, build func(last AuditRecord, ok bool) ([]AuditRecord, error)) ([]AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("trim audit: %w", err)
	}
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	a := &s.audit
	if a.conn == nil {
		return nil, fmt.Errorf("trim audit: %w", sql.ErrConnDone)
	}
	recs, err := s.appendAuditTx(ctx, a, &trimRange{from, through}, build, nil)
	if err != nil {
		return nil, fmt.Errorf("trim audit: %w", err)
	}
	return recs, nil
}

// trimTx removes the records of tr inside appendAuditTx's transaction,
// after checking that from is the lowest stored seq and through lies
// below the last record, and the marks of the removed records with them.
func trimTx(ctx context.Context, c *sql.Conn, tr *trimRange, last AuditRecord, ok bool) error {
	var first int64
	if err := c.QueryRowContext(ctx, `SELECT seq FROM audit ORDER BY seq LIMIT 1`).Scan(&first); err != nil {
		return fmt.Errorf("read first record: %w", notFound(err))
	}
	if first != tr.from || !ok || tr.through < tr.from || tr.through >= last.Seq {
		return fmt.Errorf("records %d..%d (stored %d..%d): %w", tr.from, tr.through, first, last.Seq, ErrConflict)
	}
	res, err := c.ExecContext(ctx, `DELETE FROM audit WHERE seq <= ?`, tr.through)
	if err != nil {
		return fmt.Errorf("delete records %d..%d: %w", tr.from, tr.through, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("delete records %d..%d: %w", tr.from, tr.through, err)
	}
	if n != tr.through-tr.from+1 {
		return fmt.Errorf("records %d..%d: %d deleted: %w", tr.from, tr.through, n, ErrConflict)
	}
	if _, err := c.ExecContext(ctx, `DELETE FROM audit_marks WHERE seq <= ?`, tr.through); err != nil {
		return fmt.Errorf("delete marks: %w", err)
	}
	return nil
}

// appendAuditTx is AppendAuditBatch's transaction. Caller holds auditMu.
// It is rolled back on every way out but a commit, a panic of build or
// beforeCommit included, so the connection never stays inside it.
func (s *SQLite) appendAuditTx(ctx context.Context, a *auditConn, trim *trimRange, build func(last AuditRecord, ok bool) ([]AuditRecord, error), beforeCommit func(last AuditRecord) error) (recs []AuditRecord, err error) {
	bg := context.WithoutCancel(ctx)
	if _, err := a.begin.ExecContext(bg); err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_, _ = a.rollback.ExecContext(bg)
		}
	}()
	var last AuditRecord
	err = a.last.QueryRowContext(bg).Scan(&last.Seq, &last.Hash)
	ok := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read last record: %w", err)
	}
	if trim != nil {
		if err := trimTx(bg, a.conn, trim, last, ok); err != nil {
			return nil, err
		}
	}
	if recs, err = build(last, ok); err != nil {
		return nil, err
	}
	if err := checkBatch(recs); err != nil {
		return nil, err
	}
	// The head moves to the batch's end only while it names the last
	// record (head.go); the statement's WHERE is that rule.
	end := recs[len(recs)-1]
	if _, err := a.moveHead.ExecContext(bg, end.Seq, end.Hash, last.Seq, last.Hash); err != nil {
		return nil, fmt.Errorf("move the audit head: %w", err)
	}
	for _, rec := range recs {
		if _, err := a.insert.ExecContext(bg,
			rec.Seq, toNS(rec.Time), rec.Actor, rec.Role, rec.ClientAddr, rec.Action, rec.Target, rec.Sandbox,
			rec.Verdict, rec.Detail, rec.PrevHash, rec.Hash); err != nil {
			if isUnique(err) {
				return nil, ErrConflict
			}
			return nil, fmt.Errorf("insert record %d: %w", rec.Seq, err)
		}
		if rec.Seq%auditMarkEvery == 0 {
			if _, err := a.mark.ExecContext(bg, rec.Seq); err != nil {
				return nil, fmt.Errorf("mark record %d: %w", rec.Seq, err)
			}
		}
	}
	if beforeCommit != nil {
		if err := beforeCommit(recs[len(recs)-1]); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := a.commit.ExecContext(bg); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	committed = true
	return recs, nil
}

// QueryAudit returns matching records.
func (s *SQLite) QueryAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	q, args := auditQuery(f)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query audit: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []AuditRecord
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("query audit: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanPage bounds the rows held per round trip while scanning the whole log.
const scanPage = 512

// ScanAudit walks every record in seq order, a page at a time.
func (s *SQLite) ScanAudit(ctx context.Context, fn func(AuditRecord) error) error {
	// seq is the rowid (INTEGER PRIMARY KEY): seq order is storage order.
	var after int64 = -1 << 62
	for {
		rows, err := s.db.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit WHERE seq > ? ORDER BY seq LIMIT ?`, after, scanPage)
		if err != nil {
			return fmt.Errorf("scan audit: %w", err)
		}
		var page []AuditRecord
		for rows.Next() {
			r, err := scanAudit(rows)
			if err != nil {
				_ = rows.Close()
				return fmt.Errorf("scan audit: %w", err)
			}
			page = append(page, r)
		}
		err = rows.Err()
		_ = rows.Close()
		if err != nil {
			return fmt.Errorf("scan audit: %w", err)
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < scanPage {
			return nil
		}
		after = page[len(page)-1].Seq
	}
}

// FirstAudit returns the oldest stored record.
func (s *SQLite) FirstAudit(ctx context.Context) (AuditRecord, error) {
	r, err := scanAudit(s.db.QueryRowContext(ctx, firstAuditQuery))
	if err != nil {
		return AuditRecord{}, notFound(err)
	}
	return r, nil
}

// AuditHead returns the audit_head row.
func (s *SQLite) AuditHead(ctx context.Context) (AuditHead, bool, error) {
	var h AuditHead
	err := s.db.QueryRowContext(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&h.Seq, &h.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return AuditHead{}, false, nil
	}
	if err != nil {
		return AuditHead{}, false, fmt.Errorf("read audit head: %w", err)
	}
	return h, true, nil
}

// SharedAudit: one host's file holds the chain.
func (s *SQLite) SharedAudit() bool { return false }

// AuditSize counts the stored records (seqs are contiguous: last - first
// + 1, two index probes) and estimates their bytes from the newest ones.
func (s *SQLite) AuditSize(ctx context.Context) (AuditSize, error) {
	var first, last, sampled, bytes sql.NullInt64
	err := s.db.QueryRowContext(ctx, auditSizeQuery("?"), auditSizeSample).Scan(&first, &last, &sampled, &bytes)
	if err != nil {
		return AuditSize{}, fmt.Errorf("audit size: %w", err)
	}
	return sizeOf(first, last, sampled, bytes), nil
}

// auditSizeQuery reads the first and last seq and the count and field
// bytes of the newest records (the sample size bound to ph).
func auditSizeQuery(ph string) string {
	return `SELECT (SELECT seq FROM audit ORDER BY seq LIMIT 1), (SELECT seq FROM audit ORDER BY seq DESC LIMIT 1), COUNT(*),
	SUM(length(actor) + length(role) + length(client_addr) + length(action) + length(target) + length(sandbox) + length(verdict) + length(detail) + length(prev_hash) + length(hash))
FROM (SELECT actor, role, client_addr, action, target, sandbox, verdict, detail, prev_hash, hash FROM audit ORDER BY seq DESC LIMIT ` + ph + `) AS newest`
}

func sizeOf(first, last, sampled, bytes sql.NullInt64) AuditSize {
	if !first.Valid || !last.Valid || sampled.Int64 == 0 {
		return AuditSize{}
	}
	n := last.Int64 - first.Int64 + 1
	mean := bytes.Int64/sampled.Int64 + auditRowOverhead
	return AuditSize{Records: n, Bytes: n * mean}
}

// LastAudit returns the newest record.
func (s *SQLite) LastAudit(ctx context.Context) (AuditRecord, error) {
	r, err := scanAudit(s.lastAuditStmt.QueryRowContext(ctx))
	if err != nil {
		return AuditRecord{}, notFound(err)
	}
	return r, nil
}

func escapeLike(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// auditQuery is QueryAudit's statement for f and its arguments.
func auditQuery(f AuditFilter) (string, []any) {
	var where []string
	var args []any
	if !f.Since.IsZero() {
		ns := toNS(f.Since)
		where, args = append(where, "seq > "+auditSinceBound, "time_ns >= ?"), append(args, ns, ns)
	}
	if f.AfterSeq > 0 {
		where, args = append(where, "seq > ?"), append(args, f.AfterSeq)
	}
	if f.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, f.Actor)
	}
	actions := f.Actions
	if f.Action != "" {
		actions = append([]string{f.Action}, actions...)
	}
	if len(actions) > 0 {
		var any []string
		for _, a := range actions {
			any = append(any, `action = ? OR action LIKE ? ESCAPE '\'`)
			args = append(args, a, escapeLike(a)+".%")
		}
		// #nosec G202 -- constant fragments; every value is a bound parameter
		where = append(where, "("+strings.Join(any, " OR ")+")")
	}
	if len(f.Except) > 0 {
		// #nosec G202 -- one placeholder per value; every value is a bound parameter
		where = append(where, "action NOT IN ("+strings.TrimSuffix(strings.Repeat("?,", len(f.Except)), ",")+")")
		for _, a := range f.Except {
			args = append(args, a)
		}
	}
	if f.Sandbox != "" {
		where, args = append(where, "sandbox = ?"), append(args, f.Sandbox)
	}
	q := `SELECT ` + auditColumns + ` FROM audit`
	if len(where) > 0 {
		// #nosec G202 -- only the constant fragments above are joined; every value is a bound parameter
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	if f.Descending {
		q += ` ORDER BY seq DESC`
	} else {
		q += ` ORDER BY seq`
	}
	limit := f.Limit
	if limit <= 0 || limit > MaxAuditPage {
		limit = MaxAuditPage
	}
	q += ` LIMIT ?`
	args = append(args, limit)
	return q, args
}
