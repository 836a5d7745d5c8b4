//go:build !linux

package agent

import (
	"context"
	"errors"
)

// Spare is an init cloned ahead of any sandbox; there is none off Linux.
type Spare struct{}

// ErrSpareUnusable: the spare was not bound and is gone; launch afresh.
var ErrSpareUnusable = errors.New("spare init unusable")

// CloneSpare fails: sandboxes need Linux.
func CloneSpare(context.Context, LaunchSpec) (*Spare, error) {
	return nil, errors.New("sandboxes need Linux")
}

// Pid is 0 off Linux.
func (s *Spare) Pid() int { return 0 }

// Exited is closed at once off Linux.
func (s *Spare) Exited() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Kill does nothing off Linux.
func (s *Spare) Kill() {}

// Bind fails off Linux.
func (s *Spare) Bind(context.Context, LaunchSpec) (*Instance, error) {
	return nil, ErrSpareUnusable
}
