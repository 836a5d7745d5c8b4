package archive

import (
	"errors"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// openNoFollow opens one name inside the open directory dir without
// following a symlink (os.Root would follow one, if only inside the root).
// O_NONBLOCK keeps a fifo swapped in after the listing from blocking; the
// caller judges the result by fstat.
func openNoFollow(dir *os.File, name string, wantDir bool) (*os.File, error) {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	if wantDir {
		flags |= unix.O_DIRECTORY
	}
	var fd int
	var err error
	for {
		fd, err = unix.Openat(int(dir.Fd()), name, flags, 0)
		if err != unix.EINTR {
			break
		}
	}
	runtime.KeepAlive(dir)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd) // the fcntl error is the one to report
		return nil, &os.PathError{Op: "fcntl", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) }
