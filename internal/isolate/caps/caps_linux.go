package caps

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// Capability sets and no_new_privs are per thread; a Go process has many
// threads and any of them may fork the next child. Every change here is
// therefore made on all threads at once through psx (libpsx with cgo,
// syscall.AllThreadsSyscall without), which aborts the process if the
// threads disagree rather than leaving one behind.
//
// Syscall6 with explicit zeros, not Syscall3: several prctl options
// (PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT_CLEAR_ALL) insist that the unused
// arguments are 0, and libpsx's three-argument call leaves them undefined.
func allThreadsPrctl(option, arg2, arg3 uintptr) error {
	if _, _, errno := psx.Syscall6(unix.SYS_PRCTL, option, arg2, arg3, 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// maxCap caps how high cap_last_cap may claim to go: the kernel stores
// capability sets in 64 bits.
const maxCap = 63

// LastCap returns the highest capability number this kernel knows
// (/proc/sys/kernel/cap_last_cap).
func LastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("read cap_last_cap: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > maxCap {
		return 0, fmt.Errorf("cap_last_cap %q is not a capability number", bytes.TrimSpace(b))
	}
	return n, nil
}

// DropBoundingSet removes every capability, up to cap_last_cap, from the
// bounding set of every thread. It needs CAP_SETPCAP; without it the first
// drop fails with EPERM and the error says so.
func DropBoundingSet() error {
	last, err := LastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := allThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	b, err := Bounding()
	if err != nil {
		return err
	}
	if b != 0 {
		return fmt.Errorf("bounding set still %#016x after dropping all capabilities", b)
	}
	return nil
}

// DropBoundingSetThread removes every capability, up to cap_last_cap, from
// the bounding set of the calling thread only: one prctl per capability,
// no stop-the-world. The caller's goroutine must be locked to its thread
// (runtime.LockOSThread) for good, and every child that must start with an
// empty bounding set must be forked from that thread (a child gets the
// forking thread's set; threads the calling thread creates get it too).
// The process's other threads keep theirs: Bounding, the union over all
// threads, does not fall to zero. It needs CAP_SETPCAP.
func DropBoundingSetThread() error {
	last, err := LastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d from the thread's bounding set: %w", c, err)
		}
	}
	b, err := ThreadBounding()
	if err != nil {
		return err
	}
	if b != 0 {
		return fmt.Errorf("thread's bounding set still %#016x after dropping all capabilities", b)
	}
	return nil
}

// ThreadBounding returns the bounding set of the calling thread
// (/proc/thread-self/status). The caller's goroutine should be locked to
// its thread, or the answer may be another thread's.
func ThreadBounding() (uint64, error) {
	return statusField("/proc/thread-self/status", "CapBnd")
}

// ClearAmbient empties the ambient capability set of every thread.
func ClearAmbient() error {
	if err := allThreadsPrctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return nil
}

// SetNoNewPrivs sets no_new_privs on every thread. It cannot be unset.
func SetNoNewPrivs() error {
	if err := allThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return nil
}

// Bounding returns the bounding set of the process: the union over all of
// its threads, since whichever thread forks next passes its own set on.
func Bounding() (uint64, error) {
	return unionOverThreads("CapBnd")
}

// Ambient returns the union of the ambient sets of all threads.
func Ambient() (uint64, error) {
	return unionOverThreads("CapAmb")
}

// maxThreads bounds the scan of /proc/self/task; a sandbox init has a few
// dozen threads at most.
const maxThreads = 4096

func unionOverThreads(field string) (uint64, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, fmt.Errorf("list threads: %w", err)
	}
	if len(tasks) > maxThreads {
		return 0, fmt.Errorf("%d threads, more than the %d this scan allows", len(tasks), maxThreads)
	}
	var union uint64
	seen := 0
	for _, task := range tasks {
		v, err := statusField(filepath.Join("/proc/self/task", task.Name(), "status"), field)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
				continue // the thread exited meanwhile
			}
			return 0, err
		}
		union |= v
		seen++
	}
	if seen == 0 {
		return 0, fmt.Errorf("no thread reported %s", field)
	}
	return union, nil
}

// statusField reads a hexadecimal capability mask ("CapBnd:\t000001ffffffffff")
// from a /proc status file.
func statusField(path, field string) (uint64, error) {
	f, err := os.Open(path) //nolint:gosec // G304: a /proc/self/task/<tid>/status path built by Threads' caller, never user input
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("%s in %s: %w", field, path, err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has no %s line", path, field)
}
