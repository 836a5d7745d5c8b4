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

// DetachedLayer fails off Linux.
func DetachedLayer(string, int) (*os.File, error) { return nil, errUnsupported }

// DetachedSubtree fails off Linux.
func DetachedSubtree(*os.File, string) (*os.File, error) { return nil, errUnsupported }

// OverlayWritable fails off Linux.
func OverlayWritable() ([]string, error) { return nil, errUnsupported }
