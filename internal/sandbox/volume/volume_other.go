//go:build !linux

package volume

import (
	"log/slog"
	"os"

	"github.com/sandhold/sandhold/internal/fault"
)

// Templates holds pre-formatted workspace images on Linux.
type Templates struct{}

// WaitDetached needs Linux.
func WaitDetached(string) error { return fault.New(fault.Unsupported, "snapshots need Linux") }

// ShiftIDs needs Linux.
func ShiftIDs(*os.File, uint32, uint32) error {
	return fault.New(fault.Unsupported, "snapshots need Linux")
}

// ReapLeft has nothing to reap: there are no workspace images off Linux.
func ReapLeft(string, *slog.Logger) {}
