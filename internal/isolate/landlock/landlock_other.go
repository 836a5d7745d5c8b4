//go:build !linux

package landlock

import "fmt"

// ABIVersion fails off Linux: there is no Landlock.
func ABIVersion() (int, error) { return 0, fmt.Errorf("%w: not linux", ErrUnavailable) }

// Plan fails off Linux.
func Plan(Rules) (Status, error) { return Status{}, fmt.Errorf("%w: not linux", ErrUnavailable) }

// Apply fails off Linux; nothing is restricted.
func Apply(Rules) error { return fmt.Errorf("%w: not linux", ErrUnavailable) }

// ApplyWithStatus fails off Linux; nothing is restricted.
func ApplyWithStatus(Rules) (Status, error) {
	return Status{}, fmt.Errorf("%w: not linux", ErrUnavailable)
}
