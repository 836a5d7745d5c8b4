//go:build !linux

package agent

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/sandhold/sandhold/internal/agent/proto"
)

// LaunchSpec says how to start one init.
type LaunchSpec struct {
	Exe              string
	ExeFile          *os.File
	Args             []string
	HostUID, HostGID uint32
	Workspace        *os.File
	AwaitWorkspace   func() (*os.File, error)
	RootFiles        func(pid int) ([]*os.File, error)
	Place            func(pid int) error
	CgroupDir        *os.File
	Launcher         *Launcher
	Setup            proto.Setup
	Log              io.Writer
	OnConn           func(*os.File)
	SleepGate        func(grant func())
}

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

// LauncherSpec says how to start the launcher.
type LauncherSpec struct {
	Exe     string
	ExeFile *os.File
	Args    []string
	Log     io.Writer
}

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
