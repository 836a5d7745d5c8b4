package agent

import (
	"context"
	"os"
)

// The per-platform variants (_linux.go and its _other.go stub) must offer
// the same API: this fails to compile on any platform whose variant drifted.
var (
	_ func(context.Context, LaunchSpec) (*Instance, error) = Launch
	_ func() (*os.File, *os.File, error)                   = Socketpair
	_ interface {
		Kill()
		Exited() <-chan struct{}
	} = (*Instance)(nil)
)
