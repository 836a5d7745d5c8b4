package caps

// The per-platform variants (_linux.go and its _other.go stub) must offer
// the same API: this fails to compile on any platform whose variant drifted.
var (
	_ func() (int, error)    = LastCap
	_ func() error           = DropBoundingSet
	_ func() error           = ClearAmbient
	_ func() error           = SetNoNewPrivs
	_ func() (uint64, error) = Bounding
	_ func() (uint64, error) = Ambient
)
