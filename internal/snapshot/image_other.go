//go:build !linux

package snapshot

import (
	"context"
	"os"

	"github.com/sandhold/sandhold/internal/fault"
)

var errUnsupported = fault.New(fault.Unsupported, "snapshots need Linux")

// Capture needs Linux (SEEK_DATA, clones).
func (s *Store) Capture(context.Context, *os.File, int64, Info) (*Manifest, error) {
	return nil, errUnsupported
}

// Restore needs Linux (copy_file_range).
func (s *Store) Restore(context.Context, *Manifest, string) error { return errUnsupported }

func copySparse(string, string) error { return errUnsupported }

func (s *Store) chunkImage(context.Context, *os.File, int64, *Manifest) error { return errUnsupported }
