package connlimit

import "syscall"

// DefaultMax is the connection cap when none is configured: half the
// process's open-file limit (the other half is for the store, the
// sandboxes' sockets and cgroup files, the audit log and the reserve), at
// most MaxDefault.
func DefaultMax() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return fallbackMax
	}
	return capDefault(rl.Cur / 2)
}
