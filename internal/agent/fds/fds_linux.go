// Package fds keeps descriptors from crossing an exec by accident, in each
// of the three programs around a sandbox: the server marks what it
// inherited close-on-exec at start (CloseOnExecFrom), the launcher and the
// in-sandbox init close what they inherited beyond their own
// (CloseInherited). It links nothing of theirs.
package fds

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Close closes a descriptor opened for one operation. Close on
// Linux always releases the descriptor; an error there (EINTR, EIO on a
// network file system) leaves nothing to retry, so it is dropped.
func Close(fd int) { _ = unix.Close(fd) }

// maxFDScan bounds the /proc/self/fd fallback of CloseOnExecFrom: a process
// cannot hold more descriptors than the kernel's nr_open ceiling (2^20 by
// default), so a longer listing is not one of ours.
const maxFDScan = 1 << 20

// CloseOnExecFrom marks every open descriptor numbered first or above
// close-on-exec, so no later exec passes it on.
//
// It stops descriptor inheritance from the outside in: a process that
// started the server (a shell with `9</etc/shadow`, a CI runner's pipe, a
// supervisor's socket) leaves its descriptors open and inheritable, Go's
// exec passes every descriptor that is not close-on-exec, and a sandboxed
// command would read the host file through it. Everything Go itself opens
// is already close-on-exec, so marking the whole range takes nothing the
// process needs from it; descriptors a caller hands a child on purpose
// (exec.Cmd's ExtraFiles) are dup2'ed into place in the child, which
// clears the flag there.
//
// close_range(CLOSE_RANGE_CLOEXEC) does it in one call (Linux 5.11); older
// kernels get a walk of /proc/self/fd.
func CloseOnExecFrom(first int) error {
	if first < 0 {
		return fmt.Errorf("close-on-exec from %d: negative descriptor", first)
	}
	err := unix.CloseRange(uint(first), math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) //nolint:gosec // G115: first is checked non-negative above
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("close_range: %w", err)
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list descriptors: %w", err)
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(maxFDScan)
	if err != nil {
		return fmt.Errorf("list descriptors: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < first {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			// EBADF: the listing's own descriptor, closed since.
			return fmt.Errorf("mark descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}

// CloseInherited closes every descriptor numbered first or above that is
// not close-on-exec. In the init those are exactly the ones it inherited
// without asking (everything Go opens is close-on-exec, and the server
// passes only 0-4 on purpose), so none of them can reach a command or be
// used by the init itself. close_range cannot tell them from the
// runtime's own descriptors; a walk of /proc/self/fd can.
func CloseInherited(first int) error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list descriptors: %w", err)
	}
	names, err := d.Readdirnames(maxFDScan)
	self := int(d.Fd())
	if err != nil {
		_ = d.Close()
		return fmt.Errorf("list descriptors: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < first || fd == self {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		if err := unix.Close(fd); err != nil && !errors.Is(err, unix.EINTR) {
			_ = d.Close()
			return fmt.Errorf("close inherited descriptor %d: %w", fd, err)
		}
	}
	return d.Close()
}
