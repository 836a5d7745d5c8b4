//go:build !linux

package fds

import "errors"

// CloseOnExecFrom fails: it is part of starting sandboxes, which need Linux.
func CloseOnExecFrom(int) error { return errors.New("marking inherited descriptors needs Linux") }
