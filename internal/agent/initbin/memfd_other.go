//go:build !linux

package initbin

import (
	"errors"
	"os"
)

// Memfd fails: sealed memfds are Linux's (and so are sandboxes).
func Memfd([]byte) (*os.File, error) { return nil, errors.New("sealed memfds need Linux") }

func memfd(string, []byte) (*os.File, error) { return nil, errors.New("sealed memfds need Linux") }
