//go:build linux && !amd64

package seccomp

// sysIOPL stands for iopl(2), which this architecture lacks: no system
// call has this number, so the probe gets ENOSYS (the tests that use it
// skip here anyway, see requireSeccomp).
const sysIOPL = ^uintptr(0)
