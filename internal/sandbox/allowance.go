package sandbox

import (
	"fmt"
	"sync"
)

// A pids allowance for a companion the server runs in a sandbox.
//
// cgroup pids count threads. The sandbox's browser (internal/browser) is
// 79 threads at rest and about 9 more per browser context (Chromium 156,
// multi-process, measured 2026-12-06), more than the default limit of 50:
// with it running, a command, a recording's encoder or a page's own web
// server could no longer start. While such a companion runs, the server
// raises the sandbox's limits by the companion's allowance, so the
// sandbox's own commands keep their limit; when it ends the allowance goes
// again. The allowance is the server's, a constant of the companion, never
// the caller's: the limits hold, each larger by a bounded, documented
// amount while the companion lives (SECURITY.md, "Sandboxed browser").

// GrantPids raises the sandbox's pids limits (its user group's and, by the
// same amount, its own group's) by n until release is called. A sandbox
// without a pids limit is left alone. Grants add up; release is idempotent
// and also safe after the sandbox stopped or restarted (the limits are
// re-applied from the record and the grants still held).
func (s *Sandbox) GrantPids(n int64) (release func(), err error) {
	if n <= 0 || s.rec.Spec.Limits.Pids <= 0 {
		return func() {}, nil
	}
	if err := s.setExtraPids(n); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if err := s.setExtraPids(-n); err != nil {
				s.m.log.Warn("return a pids allowance", "sandbox", s.rec.ID, "err", err)
			}
		})
	}, nil
}

// setExtraPids moves the granted allowance by delta and applies the
// limits to the live groups, if any.
func (s *Sandbox) setExtraPids(delta int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extraPids += delta
	if s.group == nil {
		return nil
	}
	if err := s.group.SetLimits(s.cgLimits()); err != nil {
		s.extraPids -= delta
		return fmt.Errorf("set the sandbox's pids allowance: %w", err)
	}
	if err := s.user.SetLimits(s.userLimits()); err != nil {
		s.extraPids -= delta
		_ = s.group.SetLimits(s.cgLimits())
		return fmt.Errorf("set the sandbox's pids allowance: %w", err)
	}
	return nil
}
