//go:build !linux

package archive

import (
	"errors"
	"os"
)

// openNoFollow fails closed: without openat(O_NOFOLLOW) on a directory
// descriptor Pack could follow a symlink swapped in after the listing.
func openNoFollow(dir *os.File, name string, wantDir bool) (*os.File, error) {
	return nil, errors.New("archive: packing is only implemented on linux")
}

func isLoop(err error) bool { return false }
