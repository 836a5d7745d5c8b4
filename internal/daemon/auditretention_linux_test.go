package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/store"
)

// The audit's retention as the server resolves it: off is no bound, a
// size is that budget, and the default is a share of the data dir's free
// space plus what the audit holds.
func TestAuditRetentionResolved(t *testing.T) {
	dir := t.TempDir()
	held := func(context.Context) (int64, error) { return 1 << 20, nil }
	free, err := freeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   config.AuditRetention
		want audit.Retention
	}{
		{"off", config.AuditRetention{Off: true}, audit.Retention{}},
		{"size and age", config.AuditRetention{MaxAge: time.Hour, Budget: 1e9}, audit.Retention{MaxAge: time.Hour, Budget: 1e9}},
		{"default", config.AuditRetention{}, audit.Retention{Budget: (free + 1<<20) / 100 * config.DefaultAuditBudgetPercent}},
		{"age only: the default size too", config.AuditRetention{MaxAge: time.Hour}, audit.Retention{MaxAge: time.Hour, Budget: (free + 1<<20) / 100 * config.DefaultAuditBudgetPercent}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auditRetention(context.Background(), config.Config{DataDir: dir, AuditRetention: tc.in}, held)
			// The free space may move a little between the two statfs.
			if err != nil || got.MaxAge != tc.want.MaxAge || (got.Budget == 0) != (tc.want.Budget == 0) ||
				got.Budget > tc.want.Budget+tc.want.Budget/100 || got.Budget < tc.want.Budget-tc.want.Budget/100 {
				t.Fatalf("auditRetention(%+v) = %+v (%v), want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// The server runs retention: records older than SANDBOX_AUDIT_RETENTION's
// age left from an earlier run move to an archive at start, and the API's
// verify proves the stored chain from the archive's anchor.
func TestServerArchivesOldAuditRecords(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	old := func() time.Time { return time.Now().Add(-time.Hour) }
	lg := audit.New(st, dir, audit.WithClock(old))
	for i := range 5 {
		if _, err := lg.Append(context.Background(), audit.Entry{Actor: "key_x", Action: "exec.run", Target: fmt.Sprint("echo ", i), Verdict: audit.Allow}); err != nil {
			t.Fatal(err)
		}
	}
	_ = lg.Close()
	_ = st.Close()

	s := start(t, dir, func(c *config.Config) { c.AuditRetention = config.AuditRetention{MaxAge: 30 * time.Minute} })
	admin := s.d.AdminKey()
	var res audit.Result
	for range 600 { // until the first round, which runs at start, has archived them
		expectOK(t, s.do("GET", "/v1/audit/verify", admin, nil, nil), 200, &res)
		if res.ArchivedThrough > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !res.OK || res.ArchivedThrough != 5 {
		t.Fatalf("verify = %+v, want OK with records 1..5 archived", res)
	}
	if n, err := audit.ArchiveBytes(dir); err != nil || n == 0 {
		t.Fatalf("archive bytes = %d (%v)", n, err)
	}
}
