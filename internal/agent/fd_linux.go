package agent

import "golang.org/x/sys/unix"

// closeFD closes a descriptor the init opened for one operation. Close on
// Linux always releases the descriptor; an error there (EINTR, EIO on a
// network file system) leaves nothing to retry, so it is dropped.
func closeFD(fd int) { _ = unix.Close(fd) }
