package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxStatusBytes caps what is read of /proc/<pid>/status.
const maxStatusBytes = 16 << 10

// ForegroundGroup returns the process group in the foreground of a TTY
// process's terminal, numbered as the sandbox sees it (for SignalGroup).
// The kernel reports the group in the server's pid namespace; it is
// translated through /proc after checking that it lives in this sandbox's
// pid namespace, so a group id that died and was reused on the host in
// between is refused rather than signalled.
func (p *Proc) ForegroundGroup() (int, error) {
	if p.PTY == nil {
		return 0, fmt.Errorf("foreground group: not a terminal process")
	}
	rc, err := p.PTY.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("foreground group: %w", err)
	}
	var host int
	var ioErr error
	if err := rc.Control(func(fd uintptr) { host, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) }); err != nil {
		return 0, fmt.Errorf("foreground group: %w", err)
	}
	if ioErr != nil {
		return 0, fmt.Errorf("foreground group: %w", ioErr)
	}
	p.s.mu.Lock()
	inst := p.s.inst
	p.s.mu.Unlock()
	if inst == nil || host <= 0 {
		return 0, fmt.Errorf("foreground group: sandbox stopped")
	}
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", inst.Pid))
	if err != nil {
		return 0, fmt.Errorf("foreground group: %w", err)
	}
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", host))
	if err != nil || got != want {
		return 0, fmt.Errorf("foreground group: group %d is not in the sandbox", host)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", host))
	if err != nil {
		return 0, fmt.Errorf("foreground group: %w", err)
	}
	defer f.Close()
	buf := make([]byte, maxStatusBytes)
	n, _ := f.Read(buf)
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) < 2 {
				break
			}
			return strconv.Atoi(fields[len(fields)-1])
		}
	}
	return 0, fmt.Errorf("foreground group: no NSpid for %d", host)
}

// Resize sets a TTY process's window size; the kernel sends SIGWINCH to
// its foreground group.
func (p *Proc) Resize(rows, cols uint16) error {
	if p.PTY == nil {
		return fmt.Errorf("resize: not a terminal process")
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
