//go:build !linux

package sandbox

import (
	"context"
	"os"

	"github.com/sandhold/sandhold/internal/fault"
)

// capture needs Linux (the freezer, the workspace image).
func (s *Sandbox) capture(context.Context, func(*os.File, int64) error) error {
	return fault.New(fault.Unsupported, "snapshots need Linux")
}

// imagePath: no image outside Linux.
func (s *Sandbox) imagePath() string { return "" }
