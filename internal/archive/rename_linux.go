package archive

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// renameNoReplace moves one name between two open directories with
// renameat2(RENAME_NOREPLACE): a name that appeared in the destination
// meanwhile is never overwritten, and single components on directory
// descriptors traverse no symlink.
func renameNoReplace(from *os.File, oldName string, to *os.File, newName string) error {
	err := unix.Renameat2(int(from.Fd()), oldName, int(to.Fd()), newName, unix.RENAME_NOREPLACE)
	runtime.KeepAlive(from)
	runtime.KeepAlive(to)
	if err != nil {
		return &os.LinkError{Op: "renameat2", Old: oldName, New: newName, Err: err}
	}
	return nil
}
