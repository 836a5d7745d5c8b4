package cdptest

import "syscall"

// procAttr runs Chromium in its own process group, killed by the kernel
// if the test binary dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
