package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCached drops f's clean pages from the page cache (POSIX_FADV_DONTNEED).
func dropCached(f *os.File) {
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) //nolint:gosec // G115: a descriptor number
}
