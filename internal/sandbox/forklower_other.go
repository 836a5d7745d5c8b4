//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os"
)

// unlayer: no layered forks outside Linux.
func (s *Sandbox) unlayer(context.Context) error { return nil }

// closeVolumeLocked: no workspace file system outside Linux.
func (s *Sandbox) closeVolumeLocked() {}

// lowerBytes: no layered sandboxes outside Linux.
func (s *Sandbox) lowerBytes() int64 { return 0 }

// forkOverlay: no fork overlays outside Linux.
var forkOverlay = func(*os.File, *os.File, uint32) (*os.File, error) { return nil, errors.ErrUnsupported }
