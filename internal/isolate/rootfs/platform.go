package rootfs

import "os"

// The per-platform variants (_linux.go and its _other.go stub) must offer
// the same API: this fails to compile on any platform whose variant drifted.
var (
	_ func(Spec) error                         = Build
	_ func() error                             = LoopbackUp
	_ func(string) (*os.File, error)           = DetachedMount
	_ func(string, int) (*os.File, error)      = DetachedLayer
	_ func(*os.File, string) (*os.File, error) = DetachedSubtree
	_ func() ([]string, error)                 = OverlayWritable
)
