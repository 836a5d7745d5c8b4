//go:build !linux

package skills

import "errors"

// tmpfileFlags needs Linux's O_TMPFILE; elsewhere an uploaded zip is
// refused (there are no sandboxes there either).
func tmpfileFlags() (int, error) { return 0, errors.New("skills: uploaded zips need Linux") }
