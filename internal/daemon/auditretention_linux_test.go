package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/config"
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
