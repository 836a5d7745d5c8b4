package sandbox

import "testing"

// TestIndexFollowsTheSandboxes: counts per key, defaults and the disk sum
// are what a scan of the sandboxes would give, through adds and removals.
func TestIndexFollowsTheSandboxes(t *testing.T) {
	m := &Manager{sandboxes: make(map[string]*Sandbox), idx: newSandboxIndex(), cfg: Config{Default: Limits{DiskBytes: 100}}}
	mk := func(id, owner string, dflt bool, disk int64) *Sandbox {
		return &Sandbox{m: m, rec: Record{ID: id, Owner: owner, Default: dflt, Spec: Spec{Limits: Limits{DiskBytes: disk}}}}
	}
	a1, a2, b1 := mk("a1", "ka", true, 0), mk("a2", "ka", false, 40), mk("b1", "kb", false, 7)
	for _, s := range []*Sandbox{a1, a2, b1} {
		m.listLocked(s)
	}
	m.listLocked(a2) // listed again: counted once
	check := func(step string) {
		t.Helper()
		owned := map[string]int{}
		defaults := map[string]*Sandbox{}
		var disk int64
		for _, s := range m.sandboxes {
			owned[s.rec.Owner]++
			if s.rec.Default {
				defaults[s.rec.Owner] = s
			}
			disk += s.diskBytes()
		}
		for k, n := range owned {
			if m.idx.owned[k] != n || m.countOwned(k) != n {
				t.Fatalf("%s: key %s owns %d, index says %d", step, k, n, m.idx.owned[k])
			}
		}
		if len(m.idx.owned) != len(owned) || len(m.idx.defaults) != len(defaults) {
			t.Fatalf("%s: index %+v, scan %v / %v", step, m.idx, owned, defaults)
		}
		for k, s := range defaults {
			if m.idx.defaults[k] != s {
				t.Fatalf("%s: default of %s", step, k)
			}
		}
		if m.disk.Committed() != disk {
			t.Fatalf("%s: disk %d, scan %d", step, m.disk.Committed(), disk)
		}
	}
	check("added")
	m.unlistLocked("a1")
	check("default removed")
	m.unlistLocked("nope")
	m.unlistLocked("b1")
	check("key gone")
	if m.disk.Committed() != 40 || m.countOwned("kb") != 0 {
		t.Fatalf("after removals: %+v", m.idx)
	}
}
