//go:build !linux

package cgroup

// Detect fails: cgroups exist only on Linux.
func Detect() (Info, error) { return Info{}, ErrUnsupported }

// New fails closed: nothing can be limited on this platform.
func New(base string) (Manager, error) {
	if err := validateBase(base); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}
