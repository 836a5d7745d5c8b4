//go:build !linux

package sandbox

import "errors"

// ForegroundGroup needs Linux's TIOCGPGRP and /proc.
func (p *Proc) ForegroundGroup() (int, error) {
	return 0, errors.New("foreground group: not supported on this platform")
}

// Resize needs Linux's TIOCSWINSZ.
func (p *Proc) Resize(rows, cols uint16) error {
	return errors.New("resize: not supported on this platform")
}
