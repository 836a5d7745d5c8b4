//go:build !linux

package archive

import (
	"errors"
	"os"
)

// renameNoReplace fails closed: without renameat2(RENAME_NOREPLACE) a move
// into place could silently replace a name created meanwhile.
func renameNoReplace(from *os.File, oldName string, to *os.File, newName string) error {
	return errors.New("archive: no-replace rename is only implemented on linux")
}
