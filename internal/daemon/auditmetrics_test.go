package daemon

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// /metrics carries the audit log's group-commit counters: records and
// batches committed by this server, moving as calls are audited.
func TestAuditCountersInMetrics(t *testing.T) {
	s := start(t, t.TempDir(), nil)
	admin := s.d.AdminKey()
	scrape := func() (records, batches float64) {
		t.Helper()
		r := s.do("GET", "/metrics", admin, nil, nil)
		if r.status != 200 {
			t.Fatalf("metrics: %d", r.status)
		}
		got := map[string]float64{}
		sc := bufio.NewScanner(bytes.NewReader(r.raw))
		for sc.Scan() {
			name, val, ok := strings.Cut(sc.Text(), " ")
			if ok && strings.HasPrefix(name, "sandhold_audit_") {
				if got[name], ok = parseFloat(val); !ok {
					t.Fatalf("metrics: %q", sc.Text())
				}
			}
		}
		records, ok1 := got["sandhold_audit_records_total"]
		batches, ok2 := got["sandhold_audit_batches_total"]
		if !ok1 || !ok2 {
			t.Fatalf("metrics lack the audit counters: %v", got)
		}
		return records, batches
	}
	r1, b1 := scrape()
	if r1 < 1 || b1 < 1 || b1 > r1 {
		t.Fatalf("records %v, batches %v: want 1 <= batches <= records", r1, b1)
	}
	for range 3 {
		expectOK(t, s.do("POST", "/v1/keys", admin, map[string]any{"name": "k", "role": "viewer"}, nil), 201, nil)
	}
	r2, b2 := scrape()
	if r2 < r1+3 || b2 <= b1 {
		t.Fatalf("after 3 audited calls: records %v -> %v, batches %v -> %v", r1, r2, b1, b2)
	}
}

func parseFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f, err == nil
}
