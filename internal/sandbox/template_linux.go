package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/template/layer"
)

// rootFiles makes the descriptors of a template root for the init pid
// (templateroot.Files). Callers hold s.mu (startLocked) and have the
// volume mounted.
func (s *Sandbox) rootFiles(pid int, dirs []string) ([]*os.File, error) {
	if s.vol == nil {
		return nil, errors.New("the workspace image is not mounted")
	}
	return templateroot.Files(s.vol, pid, dirs)
}

// PackRoot writes the sandbox's writable layer (its overlay's upper
// directory) to w as an OCI layer (layer.Pack): what it changed in its
// template's tree, the mount points its start made left out. A running
// sandbox is frozen while it is read, so the layer is one moment's. It
// starts a stopped sandbox (its image is mounted with its init) and fails
// for a host sandbox, which has no writable root.
func (s *Sandbox) PackRoot(ctx context.Context, w io.Writer, lim layer.Limits) (layer.Stats, error) {
	if s.templateDigest() == "" {
		return layer.Stats{}, fault.New(fault.Invalid, "a host sandbox has no writable root to commit: make it from a template")
	}
	if _, err := s.ensure(ctx); err != nil {
		return layer.Stats{}, err
	}
	s.mu.Lock()
	vol, group, paused := s.vol, s.group, s.state == Paused
	s.mu.Unlock()
	if vol == nil {
		return layer.Stats{}, fault.New(fault.Unavailable, "the sandbox's workspace image is not mounted")
	}
	if group != nil && !paused {
		if err := group.Freeze(); err != nil {
			return layer.Stats{}, fmt.Errorf("freeze the sandbox for its commit: %w", err)
		}
		defer func() { _ = group.Thaw() }()
	}
	upper, err := templateroot.OpenUpper(vol)
	if err != nil {
		return layer.Stats{}, err
	}
	defer func() { _ = upper.Close() }()
	return layer.Pack(ctx, w, layer.PackSpec{Upper: upper, IDBase: hostBase(s.rec.Slot), Exclude: []string{templateroot.Workspace}, Limits: lim})
}
