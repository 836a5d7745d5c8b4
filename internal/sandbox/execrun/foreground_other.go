//go:build !linux

package execrun

import (
	"errors"
	"syscall"
)

// Signal needs Linux's pidfds and /proc.
func (p *Proc) Signal(sig syscall.Signal, group bool) error {
	return errors.New("signal: not supported on this platform")
}

// SignalForeground needs Linux's TIOCGPGRP.
func (p *Proc) SignalForeground(sig syscall.Signal) (bool, error) {
	return false, errors.New("signal foreground: not supported on this platform")
}

// Resize needs Linux's TIOCSWINSZ.
func (p *Proc) Resize(rows, cols uint16) error {
	return errors.New("resize: not supported on this platform")
}
