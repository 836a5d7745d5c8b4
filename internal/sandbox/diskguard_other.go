//go:build !linux

package sandbox

import "errors"

// ImageBytes is zero: there are no workspace images off Linux.
func ImageBytes(string) int64 { return 0 }

// readDisk fails: the guard reads Linux file systems.
func readDisk(string, string) (diskReading, error) {
	return diskReading{}, errors.New("disk guard needs Linux")
}

// volClamp exists on Linux only.
type volClamp struct{}

// clampVolume fails: there is no workspace volume to clamp off Linux.
func (s *Sandbox) clampVolume() error { return errors.New("disk guard needs Linux") }

func (s *Sandbox) unclampVolume() error { return nil }
