package pgtest

import "syscall"

// procAttr runs the server as cred in its own process group, and has the
// kernel stop it (SIGQUIT: immediate shutdown) if the test binary dies.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
}
