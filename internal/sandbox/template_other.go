//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

// rootFiles fails: template roots need Linux (overlayfs, id-mapped mounts).
func (s *Sandbox) rootFiles(int, []string) ([]*os.File, error) {
	return nil, errors.New("template sandboxes need Linux")
}
