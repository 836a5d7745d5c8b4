//go:build !linux

package cdptest

import "syscall"

// procAttr runs Chromium in its own process group. Without a parent-death
// signal a browser outlives a killed test binary here; these tests run on
// Linux.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
