package seccomp

import "golang.org/x/sys/unix"

// sysIOPL is iopl(2), which only x86 has.
const sysIOPL = unix.SYS_IOPL
