//go:build !linux

package daemon

import (
	"errors"
	"runtime"
)

// checkPrivileges fails: sandboxes are made of Linux namespaces and cgroups.
func checkPrivileges() error {
	return errors.New("sandhold serve needs Linux (namespaces, cgroups); this is " + runtime.GOOS)
}

const cgroupHint = "sandhold serve needs Linux"
