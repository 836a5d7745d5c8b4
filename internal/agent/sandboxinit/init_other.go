//go:build !linux

package sandboxinit

import "errors"

// Main fails: sandboxes need Linux.
func Main() error { return errors.New("sandhold init needs Linux") }
