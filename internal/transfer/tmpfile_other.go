//go:build !linux

package transfer

import "github.com/sandhold/sandhold/internal/fault"

// tmpfileFlags fails: O_TMPFILE is Linux's, and an upload is never spooled
// into a named file instead (it could be left behind).
func tmpfileFlags() (int, error) {
	return 0, fault.New(fault.Unsupported, "extracting an upload needs Linux")
}
