//go:build !linux

package client

import "errors"

// errNoTerminal: terminal control is implemented for Linux only; a client
// elsewhere refuses interactive use rather than run without raw mode.
var errNoTerminal = errors.New("interactive terminals are supported on Linux only")

// IsTerminal reports false: no terminal control on this platform.
func IsTerminal(uintptr) bool { return false }

// TermSize is unknown here.
func TermSize(uintptr) Size { return Size{} }

// MakeRaw fails: see errNoTerminal.
func MakeRaw(uintptr) (func() error, error) { return nil, errNoTerminal }

// ReadPassword fails: see errNoTerminal.
func ReadPassword(uintptr, func()) ([]byte, error) { return nil, errNoTerminal }
