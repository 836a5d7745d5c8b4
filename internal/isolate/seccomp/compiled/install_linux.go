package compiled

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Available reports whether this kernel can enforce the filter: the seccomp
// syscall exists and supports filter mode with the errno action. It changes
// nothing, so `sandhold doctor` can call it.
func Available() error {
	action := uint32(unix.SECCOMP_RET_ERRNO)
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action))) //nolint:gosec // G103: seccomp(2) takes a pointer to the action; no libc wrapper exists
	switch {
	case errno == 0:
		return nil
	case errors.Is(errno, unix.ENOSYS):
		return fmt.Errorf("seccomp: kernel has no seccomp syscall: %w", errno)
	case errors.Is(errno, unix.EINVAL):
		// SECCOMP_GET_ACTION_AVAIL appeared in 4.14; older kernels (or
		// CONFIG_SECCOMP_FILTER=n) say EINVAL.
		return fmt.Errorf("seccomp: filter mode unavailable (kernel too old or built without it): %w", errno)
	default:
		return fmt.Errorf("seccomp: probe: %w", errno)
	}
}

// Install sets no_new_privs and loads the compiled policy on every thread
// of the calling process (SECCOMP_FILTER_FLAG_TSYNC); it is what
// seccomp.Install does, without compiling. See seccomp.Install.
func Install() error {
	if err := Available(); err != nil {
		return err
	}
	return Load(Program())
}

// Load sets no_new_privs and loads filter on every thread of the calling
// process (SECCOMP_FILTER_FLAG_TSYNC). Threads and processes created
// afterwards inherit it. It refuses, changing nothing but possibly
// no_new_privs, when any thread cannot be synchronised. It cannot be
// undone.
func Load(filter []unix.SockFilter) error {
	if len(filter) == 0 || len(filter) > unix.BPF_MAXINSNS {
		return fmt.Errorf("seccomp: program has %d instructions (kernel limit %d)", len(filter), unix.BPF_MAXINSNS)
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]} //nolint:gosec // G115: 1 <= len <= BPF_MAXINSNS (4096), checked above

	// no_new_privs is per thread, and an unprivileged seccomp() requires it
	// on the calling thread, so both calls must run on the same OS thread.
	// TSYNC then copies no_new_privs and the filter to every other thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	// go-seccomp-bpf's own LoadFilter is not used: with TSYNC, a thread that
	// cannot be synchronised is reported as a positive return value (its
	// thread id) with no errno, which that function would take as success.
	r1, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))) //nolint:gosec // G103: seccomp(2) takes a pointer to the program; filter is kept alive below
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp: load filter: %w", errno)
	}
	if r1 != 0 {
		return fmt.Errorf("seccomp: thread %d could not be synchronised to the filter", r1)
	}
	return nil
}
