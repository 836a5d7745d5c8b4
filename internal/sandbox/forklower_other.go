//go:build !linux

package sandbox

import "context"

// unlayer: no layered forks outside Linux.
func (s *Sandbox) unlayer(context.Context) error { return nil }

// collectLowers: no lower layers outside Linux.
func (m *Manager) collectLowers() {}

// lowerUsage: no lower layers outside Linux.
func (m *Manager) lowerUsage() int64 { return 0 }

// closeVolumeLocked: no workspace file system outside Linux.
func (s *Sandbox) closeVolumeLocked() {}

// lowerBytes: no layered sandboxes outside Linux.
func (s *Sandbox) lowerBytes() int64 { return 0 }
