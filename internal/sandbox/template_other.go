//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/sandhold/sandhold/internal/template/layer"
)

// rootFiles fails: template roots need Linux (overlayfs, id-mapped mounts).
func (s *Sandbox) rootFiles(int, []string) ([]*os.File, error) {
	return nil, errors.New("template sandboxes need Linux")
}

// PackRoot fails: template roots need Linux.
func (s *Sandbox) PackRoot(context.Context, io.Writer, layer.Limits) (layer.Stats, error) {
	return layer.Stats{}, errors.New("template sandboxes need Linux")
}
