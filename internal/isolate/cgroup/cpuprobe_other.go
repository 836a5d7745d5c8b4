//go:build !linux

package cgroup

import "time"

// CPUProbe answers Group.CPUUsage through a descriptor held open (Linux).
type CPUProbe struct{}

// OpenCPUProbe fails: cgroups exist only on Linux.
func OpenCPUProbe(Group) (*CPUProbe, error) { return nil, ErrUnsupported }

// Usage fails: cgroups exist only on Linux.
func (p *CPUProbe) Usage() (time.Duration, error) { return 0, ErrUnsupported }

// Close does nothing.
func (p *CPUProbe) Close() error { return nil }
