//go:build !linux

package agent

import (
	"context"
	"errors"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// Instance is a running init.
type Instance struct {
	*Client
	Pid   int
	Ready *proto.Ready
}

// Launch fails: sandboxes need Linux.
func Launch(context.Context, LaunchSpec) (*Instance, error) {
	return nil, errors.New("sandboxes need Linux")
}

// Kill does nothing off Linux.
func (i *Instance) Kill() {}

// Exited is closed at once off Linux.
func (i *Instance) Exited() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// ExitStatus is empty off Linux.
func (i *Instance) ExitStatus() string { return "" }

// Launcher is the launcher process; there is none off Linux.
type Launcher struct{}

// StartLauncher fails: sandboxes need Linux.
func StartLauncher(LauncherSpec) (*Launcher, error) {
	return nil, errors.New("the launcher needs Linux")
}

// Pid is 0 off Linux.
func (l *Launcher) Pid() int { return 0 }

// Close does nothing off Linux.
func (l *Launcher) Close() error { return nil }
