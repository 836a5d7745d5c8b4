//go:build !linux

package connlimit

// DefaultMax is the connection cap when none is configured. Off Linux the
// open-file limit is not read: a conservative fixed cap.
func DefaultMax() int { return fallbackMax }
