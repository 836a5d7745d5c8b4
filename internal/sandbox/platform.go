package sandbox

import (
	"os"
	"syscall"

	"github.com/sandhold/sandhold/internal/sandbox/startsteps"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
)

// The per-platform variants (_linux.go and its _other.go stub) must offer
// the same API: this fails to compile on any platform whose variant drifted.
var (
	_ interface {
		Signal(syscall.Signal, bool) error
		SignalForeground(syscall.Signal) (bool, error)
		Resize(rows, cols uint16) error
	} = (*Proc)(nil)
	_ interface {
		workspaceVolume(dir string, uid int, root *templateroot.Plan, clk *startsteps.Clock) (*os.File, func() error, error)
		diskBytes() int64
		releaseVolume()
	} = (*Sandbox)(nil)
)
