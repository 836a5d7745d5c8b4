package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// auditLockKey is the transaction advisory lock appends fall back to when
// the audit_head row (their usual lock) has been deleted: appends then stay
// serialised, and the missing head keeps Verify failing.
const auditLockKey int64 = 0x73616e6461756474

// AppendAudit appends one record (AppendAuditBatch with one).
func (s *Postgres) AppendAudit(ctx context.Context, build func(last AuditRecord, ok bool) (AuditRecord, error), beforeCommit func(AuditRecord) error) (AuditRecord, error) {
	recs, err := s.AppendAuditBatch(ctx, oneRecord(build), beforeCommit)
	if err != nil {
		return AuditRecord{}, err
	}
	return recs[0], nil
}

// AppendAuditBatch appends records in one transaction. Appenders on every
// node are serialised by SELECT … FOR UPDATE on the audit_head row: the
// second appender waits for the first to commit and then reads its last
// record as the last one (READ COMMITTED takes a fresh snapshot per
// statement), so the chain never forks. The inserts and the head's move go
// to the server in one round trip, and the batch costs one commit (one WAL
// flush) however many records it holds.
func (s *Postgres) AppendAuditBatch(ctx context.Context, build func(last AuditRecord, ok bool) ([]AuditRecord, error), beforeCommit func(last AuditRecord) error) ([]AuditRecord, error) {
	recs, err := s.appendAuditTx(ctx, nil, build, beforeCommit)
	if err != nil {
		return nil, fmt.Errorf("append audit: %w", err)
	}
	return recs, nil
}

// TrimAudit removes records from..through and appends build's records in
// one transaction (see Store), serialised with every node's appends by
// the same lock.
func (s *Postgres) TrimAudit(ctx context.Context, from, through int64, build func(last AuditRecord, ok bool) ([]AuditRecord, error)) ([]AuditRecord, error) {
	recs, err := s.appendAuditTx(ctx, &trimRange{from, through}, build, nil)
	if err != nil {
		return nil, fmt.Errorf("trim audit: %w", err)
	}
	return recs, nil
}

// pgTrimTx is trimTx on PostgreSQL.
func pgTrimTx(ctx context.Context, tx pgx.Tx, tr *trimRange, last AuditRecord, ok bool) error {
	var first int64
	if err := tx.QueryRow(ctx, `SELECT seq FROM audit ORDER BY seq LIMIT 1`).Scan(&first); err != nil {
		return fmt.Errorf("read first record: %w", pgNotFound(err))
	}
	if first != tr.from || !ok || tr.through < tr.from || tr.through >= last.Seq {
		return fmt.Errorf("records %d..%d (stored %d..%d): %w", tr.from, tr.through, first, last.Seq, ErrConflict)
	}
	tag, err := tx.Exec(ctx, `DELETE FROM audit WHERE seq <= $1`, tr.through)
	if err != nil {
		return fmt.Errorf("delete records %d..%d: %w", tr.from, tr.through, err)
	}
	if n := tag.RowsAffected(); n != tr.through-tr.from+1 {
		return fmt.Errorf("records %d..%d: %d deleted: %w", tr.from, tr.through, n, ErrConflict)
	}
	return nil
}

// appendAuditTx is the transaction of AppendAuditBatch and TrimAudit.
func (s *Postgres) appendAuditTx(ctx context.Context, trim *trimRange, build func(last AuditRecord, ok bool) ([]AuditRecord, error), beforeCommit func(last AuditRecord) error) ([]AuditRecord, error) {
	var recs []AuditRecord
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var head AuditHead
		haveHead := true
		err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1 FOR UPDATE`).Scan(&head.Seq, &head.Hash)
		if errors.Is(err, pgx.ErrNoRows) {
			haveHead = false
			_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, auditLockKey)
		}
		if err != nil {
			return fmt.Errorf("lock chain head: %w", err)
		}
		last, err := scanAudit(tx.QueryRow(ctx, `SELECT `+auditColumns+` FROM audit ORDER BY seq DESC LIMIT 1`))
		ok := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read last record: %w", err)
		}
		if trim != nil {
			if err := pgTrimTx(ctx, tx, trim, last, ok); err != nil {
				return err
			}
		}
		if recs, err = build(last, ok); err != nil {
			return err
		}
		if err := checkBatch(recs); err != nil {
			return err
		}
		var b pgx.Batch
		for _, rec := range recs {
			b.Queue(`INSERT INTO audit(`+auditColumns+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`,
				rec.Seq, toNS(rec.Time), rec.Actor, rec.Role, rec.ClientAddr, rec.Action, rec.Target, rec.Sandbox,
				rec.Verdict, rec.Detail, rec.PrevHash, rec.Hash)
		}
		// The head moves only while it agrees with the last record (see
		// AuditHeadStore).
		end := recs[len(recs)-1]
		if haveHead && headAgrees(head, last, ok) {
			b.Queue(`UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1`, end.Seq, end.Hash)
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			if pgIsUnique(err) {
				return ErrConflict
			}
			return fmt.Errorf("insert records: %w", err)
		}
		if beforeCommit != nil {
			return beforeCommit(end)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// AuditHead returns the chain head row; ok=false when the row is gone.
func (s *Postgres) AuditHead(ctx context.Context) (AuditHead, bool, error) {
	var h AuditHead
	err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&h.Seq, &h.Hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return AuditHead{}, false, nil
	}
	if err != nil {
		return AuditHead{}, false, fmt.Errorf("read audit head: %w", err)
	}
	return h, true, nil
}

// SharedAudit: every node of the cluster appends to this chain.
func (s *Postgres) SharedAudit() bool { return true }

// FirstAudit returns the oldest stored record.
func (s *Postgres) FirstAudit(ctx context.Context) (AuditRecord, error) {
	r, err := scanAudit(s.pool.QueryRow(ctx, `SELECT `+auditColumns+` FROM audit ORDER BY seq LIMIT 1`))
	if err != nil {
		return AuditRecord{}, pgNotFound(err)
	}
	return r, nil
}

// AuditSize counts the stored records and estimates their bytes (see
// SQLite's).
func (s *Postgres) AuditSize(ctx context.Context) (AuditSize, error) {
	var first, last, sampled, bytes sql.NullInt64
	err := s.pool.QueryRow(ctx, strings.ReplaceAll(auditSizeQuery("$1"), "length(detail)", "octet_length(detail)"), auditSizeSample).
		Scan(&first, &last, &sampled, &bytes)
	if err != nil {
		return AuditSize{}, fmt.Errorf("audit size: %w", err)
	}
	return sizeOf(first, last, sampled, bytes), nil
}

// QueryAudit returns matching records.
func (s *Postgres) QueryAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !f.Since.IsZero() {
		where = append(where, "time_ns >= "+arg(toNS(f.Since)))
	}
	if f.AfterSeq > 0 {
		where = append(where, "seq > "+arg(f.AfterSeq))
	}
	if f.Actor != "" {
		where = append(where, "actor = "+arg(f.Actor))
	}
	actions := f.Actions
	if f.Action != "" {
		actions = append([]string{f.Action}, actions...)
	}
	if len(actions) > 0 {
		var any []string
		for _, a := range actions {
			any = append(any, `action = `+arg(a)+` OR action LIKE `+arg(escapeLike(a)+".%")+` ESCAPE '\'`)
		}
		where = append(where, "("+strings.Join(any, " OR ")+")")
	}
	if len(f.Except) > 0 {
		var ph []string
		for _, a := range f.Except {
			ph = append(ph, arg(a))
		}
		where = append(where, "action NOT IN ("+strings.Join(ph, ", ")+")")
	}
	if f.Sandbox != "" {
		where = append(where, "sandbox = "+arg(f.Sandbox))
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
	q += ` LIMIT ` + arg(limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query audit: %w", err)
	}
	defer rows.Close()
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

// ScanAudit walks every record in seq order, a page at a time.
func (s *Postgres) ScanAudit(ctx context.Context, fn func(AuditRecord) error) error {
	var after int64 = -1 << 62
	for {
		rows, err := s.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`, after, scanPage)
		if err != nil {
			return fmt.Errorf("scan audit: %w", err)
		}
		var page []AuditRecord
		for rows.Next() {
			r, err := scanAudit(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("scan audit: %w", err)
			}
			page = append(page, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
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

// LastAudit returns the newest record.
func (s *Postgres) LastAudit(ctx context.Context) (AuditRecord, error) {
	r, err := scanAudit(s.pool.QueryRow(ctx, `SELECT `+auditColumns+` FROM audit ORDER BY seq DESC LIMIT 1`))
	if err != nil {
		return AuditRecord{}, pgNotFound(err)
	}
	return r, nil
}
