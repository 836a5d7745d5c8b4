package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AuditRetention is what the audit keeps on this host
// (SANDBOX_AUDIT_RETENTION): stored records older than MaxAge, and stored
// records beyond half of Budget, move to archive files; archives are
// deleted, oldest first, while stored records and archives together exceed
// Budget. The zero value is the default: no age bound, and a Budget of
// DefaultAuditBudgetPercent of the data dir's free space at start,
// computed by the server. Off keeps everything (a loosening: the audit
// then grows without a bound).
type AuditRetention struct {
	Off    bool
	MaxAge time.Duration
	Budget Size
}

// DefaultAuditBudgetPercent is the audit's share of the data dir's free
// space at start (plus what it holds already) when SANDBOX_AUDIT_RETENTION
// names no size. Beside the workspaces' DefaultDiskBudgetPercent it leaves
// the rest to the store and the host.
const DefaultAuditBudgetPercent = 5

// ParseAuditRetention parses "off", or a comma-separated age (a Go
// duration, or whole days as "90d") and/or size ("4GB").
func ParseAuditRetention(v string) (AuditRetention, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return AuditRetention{}, nil
	}
	if strings.EqualFold(v, "off") {
		return AuditRetention{Off: true}, nil
	}
	var r AuditRetention
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if d, ok := parseAge(part); ok {
			if r.MaxAge != 0 || d <= 0 {
				return AuditRetention{}, fmt.Errorf("want one positive age, got %q", v)
			}
			r.MaxAge = d
			continue
		}
		s, err := ParseSize(part)
		if err != nil || s <= 0 || r.Budget != 0 {
			return AuditRetention{}, fmt.Errorf("want off, or an age (720h, 90d) and/or a size (4GB), comma separated; got %q", v)
		}
		r.Budget = s
	}
	return r, nil
}

// parseAge reads a duration or a whole number of days ("90d").
func parseAge(s string) (time.Duration, bool) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 100*365 {
			return 0, false
		}
		return time.Duration(days) * 24 * time.Hour, true
	}
	if strings.ContainsAny(s, "hms") && !strings.ContainsAny(s, "BbKkMGTiP") {
		d, err := time.ParseDuration(s)
		return d, err == nil
	}
	return 0, false
}
