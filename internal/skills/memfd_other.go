//go:build !linux

package skills

import (
	"errors"
	"os"
)

// memFile needs Linux's memfd; elsewhere an uploaded zip is refused (there
// are no sandboxes there either).
func memFile(string, []byte) (*os.File, error) {
	return nil, errors.New("skills: uploaded zips need Linux")
}
