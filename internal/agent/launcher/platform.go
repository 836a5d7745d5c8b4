package launcher

// The per-platform variants (_linux.go and its _other.go stub) must offer
// the same API: this fails to compile on any platform whose variant drifted.
var _ func() error = Serve
