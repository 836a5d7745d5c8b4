//go:build !linux

package sandbox

import (
	"errors"
	"os"

	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
)

// workspaceVolume fails: the kernel-enforced workspace quota needs Linux
// (loop devices, ext4, the new mount API).
func (s *Sandbox) workspaceVolume(string, int, *templateroot.Plan, *startsteps.Clock) (*os.File, func() error, error) {
	return nil, nil, errors.New("workspace quota needs Linux")
}

func (s *Sandbox) diskBytes() int64 {
	if d := s.rec.Spec.Limits.DiskBytes; d > 0 {
		return d
	}
	return s.m.cfg.Default.DiskBytes
}

func (s *Sandbox) releaseVolume() {}

// diskUsage is zero: there is no workspace volume off Linux.
func (s *Sandbox) diskUsage() DiskUsage { return DiskUsage{} }
