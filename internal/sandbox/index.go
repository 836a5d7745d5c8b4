package sandbox

// What a create (or an AIO call on a default sandbox) would otherwise find
// by scanning every sandbox of the server is kept here, so the cost of a
// create does not grow with the number of sandboxes (issue 16, "flat at
// scale"): the sandboxes per key (MaxPerOwner), each key's default
// sandbox, the sum of the listed sandboxes' disk quotas (the disk budget,
// counted in the manager's diskbudget.Ledger) and the free host id ranges.

// sandboxIndex is kept in step with Manager.sandboxes, under Manager.mu.
type sandboxIndex struct {
	owned    map[string]int      // listed sandboxes per owner key
	defaults map[string]*Sandbox // each key's default sandbox
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
	m.disk.List(s.diskBytes())
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
	m.disk.Unlist(s.diskBytes())
}
