package skills

import "golang.org/x/sys/unix"

// tmpfileFlags open an unnamed file in a directory of the sandbox: it
// counts against the workspace quota while it is open and vanishes with
// its descriptor.
func tmpfileFlags() (int, error) { return unix.O_TMPFILE | unix.O_RDWR, nil }
