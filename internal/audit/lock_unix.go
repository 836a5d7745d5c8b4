//go:build unix

package audit

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockTries bounds how often lock retries when the lock file was replaced
// between opening it and locking it (each try relocks the new file).
const lockTries = 8

// lock takes an exclusive flock on the lock file (created 0600), waiting for
// other processes' appends; unlock releases it. The kernel drops the lock
// when the process dies, so a crashed appender never wedges the others.
//
// The descriptor is kept between batches (keptFile). A lock counts only on
// the file the path names: other processes lock what they open by path.
// So after locking, the path is checked to name the locked file still; if
// it was removed or replaced meanwhile, the lock moves to the new file.
func (k *keptFile) lock() (unlock func(), err error) {
	for range lockTries {
		f := k.f
		if f == nil {
			if f, _, err = k.current(true); err != nil {
				return nil, fmt.Errorf("audit lock: %w", err)
			}
		}
		fd := int(f.Fd())
		for {
			err = unix.Flock(fd, unix.LOCK_EX)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil {
			k.close()
			return nil, fmt.Errorf("audit lock: %w", err)
		}
		fi, err := os.Stat(k.path)
		if err == nil && os.SameFile(fi, k.fi) {
			return func() { _ = unix.Flock(fd, unix.LOCK_UN) }, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			_ = unix.Flock(fd, unix.LOCK_UN)
			return nil, fmt.Errorf("audit lock: %w", err)
		}
		k.close() // closing the last descriptor unlocks; open the path anew
	}
	return nil, errors.New("audit lock: the lock file keeps being replaced")
}
