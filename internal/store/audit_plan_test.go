package store

import (
	"context"
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
		}
	}
}
