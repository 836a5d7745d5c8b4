//go:build !linux

package daemon

import (
	"errors"

	"github.com/sandhold/sandhold/internal/config"
)

// hostDisk is the data dir's file system as the disk budget sees it.
type hostDisk struct{ Budget, Free, Floor int64 }

// diskBudget needs statfs; sandboxes need Linux anyway.
func diskBudget(config.Config) (hostDisk, error) {
	return hostDisk{}, errors.New("the disk budget needs Linux")
}

// freeBytes needs statfs.
func freeBytes(string) (int64, error) { return 0, errors.New("the audit's budget needs Linux") }
