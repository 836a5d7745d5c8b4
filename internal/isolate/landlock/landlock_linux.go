package landlock

import (
	"fmt"
	"os"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// ABIVersion returns the kernel's Landlock ABI version, or an error wrapping
// ErrUnavailable when Landlock is missing or disabled at boot.
func ABIVersion() (int, error) {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if v < 1 {
		return 0, fmt.Errorf("%w: kernel reports ABI %d", ErrUnavailable, v)
	}
	return v, nil
}

// Plan validates r against this kernel and reports what Apply would
// enforce, without enforcing anything (for doctor and posture).
func Plan(r Rules) (Status, error) {
	abi, err := ABIVersion()
	if err != nil {
		return Status{}, err
	}
	p, err := makePlan(abi, r, os.Stat)
	if err != nil {
		return Status{}, err
	}
	return p.status, nil
}

// Apply restricts the calling process, all of its threads, and everything
// it later starts, to r. It cannot be undone. See ApplyWithStatus.
func Apply(r Rules) error {
	_, err := ApplyWithStatus(r)
	return err
}

// ApplyWithStatus is Apply, also reporting what was enforced. On error
// nothing was enforced, except possibly no_new_privs.
func ApplyWithStatus(r Rules) (Status, error) {
	abi, err := ABIVersion()
	if err != nil {
		return Status{}, err
	}
	p, err := makePlan(abi, r, os.Stat)
	if err != nil {
		return Status{}, err
	}
	// go-landlock sets no_new_privs and calls landlock_restrict_self on
	// every OS thread (TSYNC from ABI 8, libpsx / AllThreadsSyscall below).
	if err := p.config().Restrict(p.rules()...); err != nil {
		return Status{}, fmt.Errorf("landlock: restrict: %w", err)
	}
	return p.status, nil
}
