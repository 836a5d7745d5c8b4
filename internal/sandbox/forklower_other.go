//go:build !linux

package sandbox

import "context"

// unlayer: no layered forks outside Linux.
func (s *Sandbox) unlayer(context.Context) error { return nil }

// closeVolumeLocked: no workspace file system outside Linux.
func (s *Sandbox) closeVolumeLocked() {}

// lowerBytes: no layered sandboxes outside Linux.
func (s *Sandbox) lowerBytes() int64 { return 0 }
