package cgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCPUWriteOnlyWhenChanged: a CFS bandwidth file is not written when it
// already holds the value (every write walks all of the host's task groups,
// see cpuWrite), and is when it does not. A plain file stands in for the
// control file: its modification time tells whether it was written.
func TestCPUWriteOnlyWhenChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.cfs_quota_us")
	if err := os.WriteFile(path, []byte("-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Unix(1_000_000, 0)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if err := cpuWrite(path, "-1"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("unchanged value was written (mtime %v, %v)", fi.ModTime(), err)
	}
	if err := cpuWrite(path, "50000"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "50000" {
		t.Fatalf("changed value: file holds %q (%v), want 50000", b, err)
	}
}

// TestCPULimitsFollowChanges: on the real files, limits set, lifted and set
// again all land, though unchanged ones are no longer written.
func TestCPULimitsFollowChanges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, m Manager) {
		if !canLimit(m) {
			t.Skip("no cpu controller in this back end")
		}
		g, err := m.Create("cpuchange", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = g.Destroy() }()
		for _, milli := range []int64{500, 500, 0, 0, 250} {
			if err := g.SetLimits(Limits{CPUMilli: milli}); err != nil {
				t.Fatal(err)
			}
			if got := cpuQuotaMilli(t, g); got != milli {
				t.Fatalf("after SetLimits(cpu %d): quota %d milli-CPUs", milli, got)
			}
		}
	})
}

// cpuQuotaMilli reads g's CPU quota back from the kernel (0: unlimited).
func cpuQuotaMilli(t *testing.T, g Group) int64 {
	t.Helper()
	var quota, period string
	switch gv := g.(type) {
	case *v1Group:
		q, err1 := readString(gv.dir("cpu") + "/cpu.cfs_quota_us")
		p, err2 := readString(gv.dir("cpu") + "/cpu.cfs_period_us")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		quota, period = strings.TrimSpace(q), strings.TrimSpace(p)
	case *v2Group:
		s, err := readString(gv.dir() + "/cpu.max")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			t.Fatalf("cpu.max %q", s)
		}
		quota, period = f[0], f[1]
	default:
		t.Fatalf("unknown group type %T", g)
	}
	if quota == "-1" || quota == "max" {
		return 0
	}
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || p == 0 {
		t.Fatalf("quota %q period %q", quota, period)
	}
	return q * 1000 / p
}
