//go:build !linux

package pgtest

import "syscall"

// procAttr runs the server as cred in its own process group. Without a
// parent-death signal a server outlives a killed test binary here; the
// PostgreSQL tests run on Linux.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
