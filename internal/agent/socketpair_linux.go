package agent

import (
	"fmt"
	"os"
	"syscall"
)

// Socketpair returns the two ends of a new protocol socket, close-on-exec.
func Socketpair() (server, init *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "sandhold-server"), os.NewFile(uintptr(fds[1]), "sandhold-init"), nil
}
