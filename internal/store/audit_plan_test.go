package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Migration 10 dropped audit_time and audit_action: with them present (as
// before), no audit query the server makes was planned with either, so
// dropping them changed no plan; the actor and sandbox filters still use
// their indexes. A new query shape that would need an index fails here.
func TestAuditQueryPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	plan := func(f AuditFilter) string {
		t.Helper()
		q, args := auditQuery(f)
		rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rows.Close() }()
		var out []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			out = append(out, detail)
		}
		return strings.Join(out, "; ")
	}
	since := time.Now().Add(-time.Hour)
	shapes := map[string]AuditFilter{
		"none":          {},
		"since":         {Since: since},
		"since-desc":    {Since: since, Descending: true},
		"after":         {AfterSeq: 5},
		"action":        {Action: "sandbox.exec"},
		"actions":       {Actions: []string{"auth", "keys"}, Descending: true},
		"action-since":  {Action: "auth", Since: since},
		"actor":         {Actor: "k"},
		"actor-action":  {Actor: "k", Action: "sandbox"},
		"sandbox":       {Sandbox: "sb1", Descending: true},
		"sandbox-since": {Sandbox: "sb1", Since: since, Action: "file"},
	}
	if _, err := s.db.ExecContext(ctx, `CREATE INDEX audit_time ON audit(time_ns); CREATE INDEX audit_action ON audit(action, seq)`); err != nil {
		t.Fatal(err)
	}
	for name, f := range shapes {
		p := plan(f)
		if strings.Contains(p, "audit_time") || strings.Contains(p, "audit_action") {
			t.Errorf("%s: planned with a dropped index: %s", name, p)
		}
		switch {
		case f.Actor != "" && !strings.Contains(p, "audit_actor"):
			t.Errorf("%s: not planned with audit_actor: %s", name, p)
		case f.Actor == "" && f.Sandbox != "" && !strings.Contains(p, "audit_sandbox"):
			t.Errorf("%s: not planned with audit_sandbox: %s", name, p)
		case f.Actor == "" && f.Sandbox == "" && !f.Since.IsZero() && !strings.Contains(p, "INTEGER PRIMARY KEY (rowid>?)"):
			// The seq bound of audit_marks: a range from the last mark
			// before since, not a scan from the first record.
			t.Errorf("%s: not planned as a seq range: %s", name, p)
		}
		t.Logf("%s: %s", name, p)
	}
}

// TestAuditMarksFillMatchesAppends: migration 11 marks a log written before
// the marks exactly as the appends mark a new one (audit_marks), and an
// append with no mark before it covers every record up to it.
func TestAuditMarksFillMatchesAppends(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	base := time.Unix(1_800_000_000, 0)
	appendTo := func(n int64) {
		t.Helper()
		for {
			last, err := s.LastAudit(ctx)
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			if last.Seq >= n {
				return
			}
			_, err = s.AppendAuditBatch(ctx, func(last AuditRecord, ok bool) ([]AuditRecord, error) {
				var recs []AuditRecord
				for seq := last.Seq + 1; seq <= n && len(recs) < MaxAuditBatch; seq++ {
					tm := base.Add(time.Duration(seq) * time.Second)
					if seq == 10 {
						tm = base.Add(100 * time.Hour) // the latest time of all, early
					}
					recs = append(recs, AuditRecord{Seq: seq, Time: tm, Action: "a", Hash: fmt.Sprint(seq)})
				}
				return recs, nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	marks := func() string {
		t.Helper()
		rows, err := s.db.QueryContext(ctx, `SELECT seq, max_time_ns FROM audit_marks ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rows.Close() }()
		var out []string
		for rows.Next() {
			var seq, ns int64
			if err := rows.Scan(&seq, &ns); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d:%d", seq, ns))
		}
		return strings.Join(out, " ")
	}
	appendTo(2*auditMarkEvery + 5)
	byAppends := marks()
	future := toNS(base.Add(100 * time.Hour))
	if want := fmt.Sprintf("%d:%d %d:%d", auditMarkEvery, future, 2*auditMarkEvery, future); byAppends != want {
		t.Fatalf("marks by the appends: %s, want %s", byAppends, want)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM audit_marks`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, auditMarksFill); err != nil {
		t.Fatal(err)
	}
	if got := marks(); got != byAppends {
		t.Errorf("marks by the migration's fill: %s, want %s", got, byAppends)
	}
	// No mark before the next one: it still covers record 10.
	if _, err := s.db.ExecContext(ctx, `DELETE FROM audit_marks`); err != nil {
		t.Fatal(err)
	}
	appendTo(3 * auditMarkEvery)
	if got, want := marks(), fmt.Sprintf("%d:%d", 3*auditMarkEvery, future); got != want {
		t.Errorf("a mark with none before it: %s, want %s", got, want)
	}
}
