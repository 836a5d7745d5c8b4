package config

import (
	"testing"
	"time"
)

func TestParseAuditRetention(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want AuditRetention
		bad  bool
	}{
		{"default", "", AuditRetention{}, false},
		{"off", "off", AuditRetention{Off: true}, false},
		{"age", "720h", AuditRetention{MaxAge: 720 * time.Hour}, false},
		{"days", "90d", AuditRetention{MaxAge: 90 * 24 * time.Hour}, false},
		{"size", "4GB", AuditRetention{Budget: 4e9}, false},
		{"both", "30d, 2GiB", AuditRetention{MaxAge: 30 * 24 * time.Hour, Budget: 2 << 30}, false},
		{"two ages", "1h,2h", AuditRetention{}, true},
		{"two sizes", "1GB,2GB", AuditRetention{}, true},
		{"zero days", "0d", AuditRetention{}, true},
		{"negative age", "-1h", AuditRetention{}, true},
		{"zero size", "0", AuditRetention{}, true},
		{"garbage", "forever", AuditRetention{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAuditRetention(tc.in)
			if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
				t.Fatalf("ParseAuditRetention(%q) = %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.bad)
			}
		})
	}
}
