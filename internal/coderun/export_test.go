package coderun

import "time"

// ReapIdle runs the idle reaper as of now (tests move the clock).
func (s *Service) ReapIdle(now time.Time) { s.reapIdle(now) }
