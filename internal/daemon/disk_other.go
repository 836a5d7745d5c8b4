//go:build !linux

package daemon

import (
	"errors"

	"github.com/sandhold/sandhold/internal/config"
)

// diskBudget needs statfs; sandboxes need Linux anyway.
func diskBudget(config.Config) (budget, free int64, err error) {
	return 0, 0, errors.New("the disk budget needs Linux")
}
