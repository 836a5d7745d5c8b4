//go:build !linux

package compiled

import "errors"

// errUnsupported is returned by every enforcing call off Linux: there is no
// seccomp there, and pretending to filter would be worse than refusing.
var errUnsupported = errors.New("seccomp: only available on linux")

// Available always fails off Linux.
func Available() error { return errUnsupported }

// Install always fails off Linux; nothing is filtered.
func Install() error { return errUnsupported }
