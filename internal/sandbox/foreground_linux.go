package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Signals to a spawned process are sent from the host: the init runs as
// root of the sandbox's user namespace without CAP_KILL and may not signal
// the sandbox user's processes. Each target is opened as a pidfd and kept
// only if it is still in the process's execution group afterwards, so a
// pid that died and was reused between listing and signalling is never
// hit: nothing outside the execution group can receive these signals.

// maxProcBytes caps what is read of a /proc/<pid> file.
const maxProcBytes = 16 << 10

// member is one process of an execution group, pinned by a pidfd.
type member struct {
	fd    int
	pid   int // host pid
	pgid  int // host process group
	nspid int // pid inside the sandbox
}

// members pins every process of p's execution group.
func (p *Proc) members() ([]member, error) {
	pids, err := p.slot.g.Procs()
	if err != nil {
		return nil, fmt.Errorf("list execution group: %w", err)
	}
	var out []member
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		m := member{fd: fd, pid: pid}
		if m.pgid, m.nspid, err = procIDs(pid); err != nil {
			_ = unix.Close(fd)
			continue
		}
		out = append(out, m)
	}
	// Keep only those still in the group now that they are pinned.
	again, err := p.slot.g.Procs()
	if err != nil {
		closeMembers(out)
		return nil, fmt.Errorf("list execution group: %w", err)
	}
	still := make(map[int]bool, len(again))
	for _, pid := range again {
		still[pid] = true
	}
	kept := out[:0]
	for _, m := range out {
		if still[m.pid] {
			kept = append(kept, m)
		} else {
			_ = unix.Close(m.fd)
		}
	}
	return kept, nil
}

func closeMembers(ms []member) {
	for _, m := range ms {
		_ = unix.Close(m.fd)
	}
}

// procIDs reads a host pid's process group and its pid in the innermost
// pid namespace.
func procIDs(pid int) (pgid, nspid int, err error) {
	stat, err := readProc(pid, "stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) state ppid pgrp …": comm may hold anything but ends at
	// the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return 0, 0, errors.New("malformed stat")
	}
	if pgid, err = strconv.Atoi(f[2]); err != nil {
		return 0, 0, err
	}
	status, err := readProc(pid, "status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			nspid, err = strconv.Atoi(fs[len(fs)-1])
			return pgid, nspid, err
		}
	}
	return 0, 0, errors.New("no NSpid")
}

func readProc(pid int, name string) ([]byte, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/" + name) //nolint:gosec // G304: a /proc file of a pid we started, by a fixed name
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, maxProcBytes)
	n, err := f.Read(buf)
	if n == 0 && err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// send signals the members match picks; it reports how many it reached.
func send(ms []member, sig syscall.Signal, match func(member) bool) int {
	n := 0
	for _, m := range ms {
		if match(m) && unix.PidfdSendSignal(m.fd, sig, nil, 0) == nil {
			n++
		}
	}
	return n
}

// Signal delivers sig to the process, or with group to every process of
// its process group (within its execution group).
func (p *Proc) Signal(sig syscall.Signal, group bool) error {
	ms, err := p.members()
	if err != nil {
		return err
	}
	defer closeMembers(ms)
	leader := -1
	for _, m := range ms {
		if m.nspid == p.Pid {
			leader = m.pid
		}
	}
	if leader < 0 {
		return errors.New("signal: the process has exited")
	}
	send(ms, sig, func(m member) bool { return m.pid == leader || (group && m.pgid == leader) })
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
	defer closeMembers(ms)
	for _, m := range ms {
		if m.nspid == p.Pid && m.pgid == fg {
			return true, nil
		}
	}
	send(ms, sig, func(m member) bool { return m.pgid == fg })
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
