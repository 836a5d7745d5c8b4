package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkAuditQuery1M times the audit queries the API makes (GET
// /v1/audit's since, actor, action and sandbox filters, both orders) on a
// log of 1,000,000 records (TestAuditQueryPlans checks which index each
// filter is planned with). SANDHOLD_BENCH_AUDIT_DB names a data dir to
// keep the filled database between runs (it takes a while to fill).
func BenchmarkAuditQuery1M(b *testing.B) {
	ctx := context.Background()
	dir := os.Getenv("SANDHOLD_BENCH_AUDIT_DB")
	if dir == "" {
		dir = b.TempDir()
	}
	s, err := Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	const n = 1_000_000
	const t0 = int64(1_700_000_000_000_000_000)
	var have int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM audit`).Scan(&have); err != nil {
		b.Fatal(err)
	}
	if have < n {
		err := s.withTx(ctx, func(tx *sql.Tx) error {
			for i := have + 1; i <= n; i++ {
				action := "sandbox.exec"
				switch i % 20 {
				case 0:
					action = "sandbox.create"
				case 1:
					action = "sandbox.delete"
				case 2:
					action = "auth.key_create"
				case 3:
					action = "file.read"
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO audit(`+auditColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
					i, t0+i*1_000_000, fmt.Sprintf("key%d", i%10), "agent", "127.0.0.1", action,
					fmt.Sprintf("sb%d", i/1000), fmt.Sprintf("sb%d", i/1000), "allowed", []byte(`{"argv":["true"],"exit_code":0}`),
					strings.Repeat("a", 64), strings.Repeat("b", 64)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		// Written past the appends: marked as migration 11 marks a log.
		if _, err := s.db.ExecContext(ctx, `DELETE FROM audit_marks;`+auditMarksFill); err != nil {
			b.Fatal(err)
		}
	}
	// Migration 10 dropped audit_time and audit_action;
	// SANDHOLD_BENCH_AUDIT_INDEXES=old makes them again, to time the
	// queries as before it.
	if os.Getenv("SANDHOLD_BENCH_AUDIT_INDEXES") == "old" {
		if _, err := s.db.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS audit_time ON audit(time_ns);
			CREATE INDEX IF NOT EXISTS audit_action ON audit(action, seq)`); err != nil {
			b.Fatal(err)
		}
	}
	recent := time.Unix(0, t0+(n-100)*1_000_000)
	cases := []struct {
		name string
		f    AuditFilter
	}{
		{"since-recent", AuditFilter{Since: recent, Limit: 100}},
		{"since-recent-desc", AuditFilter{Since: recent, Limit: 100, Descending: true}},
		{"action-prefix-desc", AuditFilter{Action: "auth", Limit: 100, Descending: true}},
		{"action-absent-desc", AuditFilter{Action: "control", Limit: 100, Descending: true}},
		{"action-exact", AuditFilter{Action: "sandbox.create", Limit: 100}},
		{"actor-since", AuditFilter{Actor: "key3", Since: time.Unix(0, t0+(n-1000)*1_000_000), Limit: 100}},
		{"sandbox", AuditFilter{Sandbox: "sb500", Limit: 100}},
		{"after-seq", AuditFilter{AfterSeq: n - 50, Limit: 100}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.QueryAudit(ctx, c.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
