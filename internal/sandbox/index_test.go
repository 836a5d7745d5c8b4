package sandbox

import "testing"

func TestSlotAllocReusesFreedAndSkipsMarked(t *testing.T) {
	a := newSlotAlloc(6)
	a.mark(1) // a recorded sandbox's, at start
	a.mark(3)
	var got []int
	for range 4 {
		i, err := a.alloc()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, i)
	}
	if want := []int{0, 2, 4, 5}; !equalInts(got, want) {
		t.Fatalf("allocated %v, want %v (marked slots skipped)", got, want)
	}
	if _, err := a.alloc(); err == nil {
		t.Fatal("allocated past the limit")
	}
	a.release(2)
	a.release(1) // the recorded sandbox was deleted
	a.release(1) // twice: no duplicate on the free list
	for _, want := range []int{1, 2} {
		i, err := a.alloc()
		if err != nil || i != want {
			t.Fatalf("alloc = %d, %v; want %d", i, err, want)
		}
	}
	if i, err := a.alloc(); err == nil {
		t.Fatalf("allocated %d with every slot in use", i)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

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
		if m.idx.disk != disk {
			t.Fatalf("%s: disk %d, scan %d", step, m.idx.disk, disk)
		}
	}
	check("added")
	m.unlistLocked("a1")
	check("default removed")
	m.unlistLocked("nope")
	m.unlistLocked("b1")
	check("key gone")
	if m.idx.disk != 40 || m.countOwned("kb") != 0 {
		t.Fatalf("after removals: %+v", m.idx)
	}
}
