package sandbox

import "github.com/sandhold/sandhold/internal/fault"

// What a create (or an AIO call on a default sandbox) would otherwise find
// by scanning every sandbox of the server is kept here, so the cost of a
// create does not grow with the number of sandboxes (issue 16, "flat at
// scale"): the sandboxes per key (MaxPerOwner), each key's default
// sandbox, the sum of the listed sandboxes' disk quotas (the disk budget)
// and the free host id ranges.

// sandboxIndex is kept in step with Manager.sandboxes, under Manager.mu.
type sandboxIndex struct {
	owned    map[string]int      // listed sandboxes per owner key
	defaults map[string]*Sandbox // each key's default sandbox
	disk     int64               // sum of the listed sandboxes' quotas
}

func newSandboxIndex() sandboxIndex {
	return sandboxIndex{owned: make(map[string]int), defaults: make(map[string]*Sandbox)}
}

// listLocked adds s to the server's sandboxes. Callers hold m.mu.
func (m *Manager) listLocked(s *Sandbox) {
	if old := m.sandboxes[s.rec.ID]; old != nil {
		m.unlistLocked(old.rec.ID)
	}
	m.sandboxes[s.rec.ID] = s
	m.idx.owned[s.rec.Owner]++
	if s.rec.Default {
		m.idx.defaults[s.rec.Owner] = s
	}
	m.idx.disk += s.diskBytes()
}

// unlistLocked removes sandbox id. Callers hold m.mu.
func (m *Manager) unlistLocked(id string) {
	s := m.sandboxes[id]
	if s == nil {
		return
	}
	delete(m.sandboxes, id)
	if m.idx.owned[s.rec.Owner]--; m.idx.owned[s.rec.Owner] <= 0 {
		delete(m.idx.owned, s.rec.Owner)
	}
	if m.idx.defaults[s.rec.Owner] == s {
		delete(m.idx.defaults, s.rec.Owner)
	}
	m.idx.disk -= s.diskBytes()
}

// slotAlloc hands out host id ranges (slots) below maxSlots in O(1): a
// stack of freed slots, then the next never-used one.
type slotAlloc struct {
	used map[int]bool
	free []int // freed slots, reused last-freed first
	next int   // every slot >= next is unused unless marked
	max  int
}

func newSlotAlloc(limit int) slotAlloc { return slotAlloc{used: make(map[int]bool), max: limit} }

// mark reserves slot i (a recorded sandbox's, at start).
func (a *slotAlloc) mark(i int) { a.used[i] = true }

func (a *slotAlloc) alloc() (int, error) {
	for len(a.free) > 0 {
		i := a.free[len(a.free)-1]
		a.free = a.free[:len(a.free)-1]
		if !a.used[i] {
			a.used[i] = true
			return i, nil
		}
	}
	// Slots marked at start are skipped once each: amortised O(1).
	for a.next < a.max {
		i := a.next
		a.next++
		if !a.used[i] {
			a.used[i] = true
			return i, nil
		}
	}
	return 0, fault.New(fault.Unavailable, "no free sandbox id range")
}

func (a *slotAlloc) release(i int) {
	if !a.used[i] {
		return
	}
	delete(a.used, i)
	a.free = append(a.free, i)
}
