package sandbox

import "sort"

// HaltFreeze is the sandbox side of an operator's HALT: it kills every
// running execution (their whole process trees) and freezes every running
// sandbox. It returns the ids of the sandboxes it froze, so that unhalt
// thaws exactly those: a sandbox its owner had paused before the HALT
// stays paused afterwards.
func (m *Manager) HaltFreeze(reason string) []string {
	var frozen []string
	for _, s := range m.All() {
		s.execs.KillAll("halt: " + reason)
		s.mu.Lock()
		running := s.state == Running
		s.mu.Unlock()
		if !running {
			continue
		}
		if err := s.pause(); err != nil {
			m.log.Error("halt: freeze sandbox", "id", s.rec.ID, "err", err)
			continue
		}
		frozen = append(frozen, s.rec.ID)
	}
	sort.Strings(frozen)
	return frozen
}

// HaltThaw undoes HaltFreeze for the given sandboxes (those that still
// exist and are still paused); it returns how many it thawed.
func (m *Manager) HaltThaw(ids []string) int {
	n := 0
	for _, id := range ids {
		m.mu.Lock()
		s := m.sandboxes[id]
		m.mu.Unlock()
		if s == nil {
			continue
		}
		s.mu.Lock()
		paused := s.state == Paused
		s.mu.Unlock()
		if !paused {
			continue
		}
		if err := s.resume(); err != nil {
			m.log.Error("unhalt: thaw sandbox", "id", id, "err", err)
			continue
		}
		n++
	}
	return n
}

// RunningExecs is how many executions of the sandbox are running (HALT's
// tests wait for a command to start before halting).
func (s *Sandbox) RunningExecs() int { return s.execs.Running() }

// RevokeOwner ends what a revoked key holds in the sandboxes: every
// running execution it started, in any sandbox, and every sandbox it
// owns, which is stopped (its processes killed, its cgroup removed), not
// deleted: the record and the workspace stay for an admin. It returns the
// ids of the sandboxes it stopped and how many executions elsewhere it
// killed.
func (m *Manager) RevokeOwner(owner string) (stopped []string, killed int) {
	for _, s := range m.All() {
		if s.rec.Owner != owner {
			killed += s.execs.KillOf(owner, "key revoked")
			continue
		}
		s.mu.Lock()
		live := s.state != Stopped
		s.mu.Unlock()
		if live {
			s.shutdown()
			stopped = append(stopped, s.rec.ID)
		}
	}
	sort.Strings(stopped)
	return stopped, killed
}
