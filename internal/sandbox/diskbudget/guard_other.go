//go:build !linux

package diskbudget

import (
	"errors"
	"os"
)

// MaxImageScan bounds the workspace directories one reading looks at.
const MaxImageScan = 20000

// EntriesBytes is zero: there are no workspace images off Linux.
func EntriesBytes(string, ...string) int64 { return 0 }

// Free fails: the guard reads Linux file systems.
func Free(string) (int64, error) { return 0, errors.New("disk guard needs Linux") }

// Clamp exists on Linux only.
type Clamp struct{}

// ClampVolume fails: there is no workspace volume to clamp off Linux.
func ClampVolume(*os.File) (*Clamp, error) { return nil, errors.New("disk guard needs Linux") }

// Release: nothing is clamped off Linux.
func (c *Clamp) Release() error { return nil }
