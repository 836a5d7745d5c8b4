package snapkeep

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/volume"
)

// A capture reads a sandbox's workspace image while it holds still: the
// sandbox (its capture, internal/sandbox) freezes every process of the
// sandbox and flushes the file system to the image, then reads it here.
// thaw undoes the freeze: it is called as soon as what fn reads no longer
// changes with the sandbox (a clone, a flattened copy), and may be called
// again; hook sees each capture just before its image is read (a test's
// window into whether the sandbox runs meanwhile).

// Freezer is a sandbox's group as a capture freezes it (the cgroup
// freezer, v1 or v2).
type Freezer interface {
	Freeze() error
	Thaw() error
}

// Hold freezes g (nil: nothing of the sandbox runs) and flushes the
// mounted workspace fs (nil: not mounted) to its image: with every writer
// frozen, what syncfs writes back is the whole state. thaw undoes the
// freeze, once (a failed thaw is logged with the sandbox's id); a failed
// flush is undone before Hold returns.
func Hold(g Freezer, fs *os.File, log *slog.Logger, id string) (thaw func(), err error) {
	thaw = func() {}
	if g != nil {
		if err := g.Freeze(); err != nil {
			return nil, fmt.Errorf("freeze sandbox for a snapshot: %w", err)
		}
		var once sync.Once
		thaw = func() {
			once.Do(func() {
				if err := g.Thaw(); err != nil {
					log.Error("thaw sandbox after a snapshot", "id", id, "err", err)
				}
			})
		}
	}
	if fs != nil {
		if err := volume.SyncFS(fs); err != nil {
			thaw()
			return nil, fmt.Errorf("flush workspace for a snapshot: %w", err)
		}
	}
	return thaw, nil
}

// ReadImage runs fn on the workspace image of dir (volume.ImageName),
// held still by the caller until thaw.
func ReadImage(dir string, thaw, hook func(), fn func(img *os.File, size int64) error) error {
	f, err := os.OpenFile(filepath.Join(dir, volume.ImageName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0) //nolint:gosec // G304: a sandbox's own workspace image, below the data dir
	if errors.Is(err, os.ErrNotExist) {
		return fault.New(fault.Conflict, "the sandbox has no workspace image yet")
	}
	if err != nil {
		return fmt.Errorf("open workspace image: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open workspace image: %w", err)
	}
	// Where the file system shares blocks, the frozen moment is one clone
	// of the whole image (FICLONE: milliseconds, whatever its size); the
	// snapshot then reads the clone with the sandbox running again.
	if c, err := volume.Clone(f, dir); err == nil {
		defer func() { _ = c.Close() }()
		thaw()
		hook()
		return fn(c, st.Size())
	}
	hook()
	return fn(f, st.Size())
}

// ReadFlat runs fn on flat, a layered sandbox's merged view copied whole
// into an image of its size (forklower.Flatten), and removes it.
func ReadFlat(flat *volume.Staged, thaw, hook func(), fn func(img *os.File, size int64) error) error {
	defer flat.Abort()
	thaw()
	hook()
	st, err := flat.File().Stat()
	if err != nil {
		return fmt.Errorf("open workspace image: %w", err)
	}
	return fn(flat.File(), st.Size())
}
