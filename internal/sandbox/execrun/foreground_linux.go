package execrun

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/sandbox/pidgroup"
)

// Signals to a spawned process are sent from the host: the init runs as
// root of the sandbox's user namespace without CAP_KILL and may not signal
// the sandbox user's processes. Each target is opened as a pidfd and kept
// only if it is still in the process's execution group afterwards, so a
// pid that died and was reused between listing and signalling is never
// hit: nothing outside the execution group can receive these signals.

// members pins every process of p's execution group (pidgroup.Pin).
func (p *Proc) members() ([]pidgroup.Member, error) {
	ms, err := pidgroup.Pin(p.slot.Cgroup.Procs)
	if err != nil {
		return nil, fmt.Errorf("list execution group: %w", err)
	}
	return ms, nil
}

// Signal delivers sig to the process, or with group to every process of
// its process group (within its execution group).
func (p *Proc) Signal(sig syscall.Signal, group bool) error {
	ms, err := p.members()
	if err != nil {
		return err
	}
	defer pidgroup.Close(ms)
	leader := -1
	for _, m := range ms {
		if m.NSpid == p.Pid {
			leader = m.Pid
		}
	}
	if leader < 0 {
		return errors.New("signal: the process has exited")
	}
	pidgroup.Send(ms, sig, func(m pidgroup.Member) bool { return m.Pid == leader || (group && m.Pgid == leader) })
	return nil
}

// SignalForeground delivers sig to the process group in the foreground of
// a TTY process's terminal. When that group is the process's own (a shell
// at its prompt or running a builtin), it sends nothing and reports
// leader, so the caller can decide what the shell itself gets.
func (p *Proc) SignalForeground(sig syscall.Signal) (leader bool, err error) {
	if p.PTY == nil {
		return false, errors.New("signal foreground: not a terminal process")
	}
	rc, err := p.PTY.SyscallConn()
	if err != nil {
		return false, fmt.Errorf("signal foreground: %w", err)
	}
	var fg int
	var ioErr error
	if err := rc.Control(func(fd uintptr) { fg, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) }); err != nil {
		return false, fmt.Errorf("signal foreground: %w", err)
	}
	if ioErr != nil {
		return false, fmt.Errorf("signal foreground: %w", ioErr)
	}
	ms, err := p.members()
	if err != nil {
		return false, err
	}
	defer pidgroup.Close(ms)
	for _, m := range ms {
		if m.NSpid == p.Pid && m.Pgid == fg {
			return true, nil
		}
	}
	pidgroup.Send(ms, sig, func(m pidgroup.Member) bool { return m.Pgid == fg })
	return false, nil
}

// Resize sets a TTY process's window size; the kernel sends SIGWINCH to
// its foreground group.
func (p *Proc) Resize(rows, cols uint16) error {
	if p.PTY == nil {
		return errors.New("resize: not a terminal process")
	}
	rc, err := p.PTY.SyscallConn()
	if err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	return ioErr
}
