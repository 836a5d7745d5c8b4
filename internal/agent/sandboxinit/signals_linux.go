package sandboxinit

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sigaction is the kernel's struct sigaction on x86-64.
type sigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// sigIgn is SIG_IGN; SIG_DFL is 0.
const sigIgn = 1

// defaultSignals gives each signal its default disposition, whatever
// handler the runtime installed. The runtime still counts them as its own,
// so a forked child resets them to the default as before (they are
// already), and nothing in the init asks os/signal for them.
func defaultSignals(sigs ...unix.Signal) {
	for _, sig := range sigs {
		dfl := sigaction{}
		_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0) //nolint:gosec // G103: the kernel ABI needs the pointer
	}
}

// resetIgnoredSignals sets every signal still ignored to its default. The
// init inherits its dispositions from the server, and ignored signals
// survive exec: a signal the server's parent ignored (a CI runner, a
// service manager) would otherwise start ignored in every command. Go
// leaves inherited ignored signals alone where it installs no handler; the
// ones it handles are not SIG_IGN and are not touched. For the init itself
// a default disposition changes nothing: the kernel drops signals without a
// handler that processes inside its pid namespace send to PID 1.
func resetIgnoredSignals() {
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		var old sigaction
		_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0) //nolint:gosec // G103: the kernel ABI needs the pointer
		if errno != 0 {
			continue
		}
		if old.handler != sigIgn {
			continue
		}
		dfl := sigaction{}
		_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0) //nolint:gosec // G103: the kernel ABI needs the pointer
	}
}
