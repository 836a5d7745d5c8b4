package landlock

// The per-platform variants (_linux.go and its _other.go stub) must offer
// the same API: this fails to compile on any platform whose variant drifted.
var (
	_ func() (int, error)         = ABIVersion
	_ func(Rules) (Status, error) = Plan
	_ func(Rules) error           = Apply
	_ func(Rules) (Status, error) = ApplyWithStatus
)
