package transfer

import "golang.org/x/sys/unix"

// tmpfileFlags are the open flags of the unnamed file an extracting upload
// is spooled into (it vanishes with its last descriptor).
func tmpfileFlags() (int, error) { return unix.O_TMPFILE | unix.O_RDWR, nil }
