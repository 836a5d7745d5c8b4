package archive

import "os"

// The per-platform variants (_linux.go and its _other.go stub) must offer
// the same API: this fails to compile on any platform whose variant drifted.
var (
	_ func(*os.File, string, *os.File, string) error = renameNoReplace
	_ func(*os.File, string, bool) (*os.File, error) = openNoFollow
	_ func(error) bool                               = isLoop
)
