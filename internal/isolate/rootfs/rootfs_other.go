//go:build !linux

package rootfs

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("rootfs: sandbox roots need Linux")

// Build fails: there is no sandbox root off Linux.
func Build(Spec) error { return errUnsupported }

// LoopbackUp fails off Linux.
func LoopbackUp() error { return errUnsupported }

// DetachedMount fails off Linux.
func DetachedMount(string) (*os.File, error) { return nil, errUnsupported }
