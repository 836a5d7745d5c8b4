//go:build !linux

package layer

import (
	"context"
	"errors"
	"io"
	"os"
)

var errUnsupported = errors.New("layer: template layers need Linux (openat2, overlay whiteouts)")

// PackSpec says how to read an overlay's upper directory as a layer.
type PackSpec struct {
	Upper   *os.File
	IDBase  uint32
	Exclude []string
	Limits  Limits
}

// Unpack fails off Linux.
func Unpack(context.Context, io.Reader, string, Limits) (Stats, error) {
	return Stats{}, errUnsupported
}

// Pack fails off Linux.
func Pack(context.Context, io.Writer, PackSpec) (Stats, error) { return Stats{}, errUnsupported }
