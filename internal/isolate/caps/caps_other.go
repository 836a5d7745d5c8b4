//go:build !linux

package caps

import "errors"

// errUnsupported: there are no Linux capabilities to drop here, and
// claiming success would hide that nothing was done.
var errUnsupported = errors.New("caps: only available on linux")

// LastCap fails off Linux.
func LastCap() (int, error) { return 0, errUnsupported }

// DropBoundingSet fails off Linux.
func DropBoundingSet() error { return errUnsupported }

// DropBoundingSetThread fails off Linux.
func DropBoundingSetThread() error { return errUnsupported }

// ThreadBounding fails off Linux.
func ThreadBounding() (uint64, error) { return 0, errUnsupported }

// ClearAmbient fails off Linux.
func ClearAmbient() error { return errUnsupported }

// SetNoNewPrivs fails off Linux.
func SetNoNewPrivs() error { return errUnsupported }

// Bounding fails off Linux.
func Bounding() (uint64, error) { return 0, errUnsupported }

// Ambient fails off Linux.
func Ambient() (uint64, error) { return 0, errUnsupported }
