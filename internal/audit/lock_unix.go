//go:build unix

package audit

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive flock on path (created 0600), waiting for
// other processes' appends; unlock releases it. The kernel drops the lock
// when the process dies, so a crashed appender never wedges the others.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // #nosec G304 -- the lock file beside the head file in the configured data dir, not request input
	if err != nil {
		return nil, fmt.Errorf("audit lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("audit lock: %w", err)
	}
	return func() { _ = f.Close() }, nil // closing the last descriptor unlocks
}
