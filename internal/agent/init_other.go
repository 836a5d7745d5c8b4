//go:build !linux

package agent

import "errors"

// Main fails: sandboxes need Linux.
func Main() error { return errors.New("sandhold init needs Linux") }

// CloseOnExecFrom fails: it is part of starting sandboxes, which need Linux.
func CloseOnExecFrom(int) error { return errors.New("marking inherited descriptors needs Linux") }
