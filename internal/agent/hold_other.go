//go:build !linux

package agent

import (
	"errors"
	"os"
)

// Hold is Linux-only (hold_linux.go).
type Hold struct{}

// NewHold fails: there are no sandboxes here.
func NewHold() (*Hold, error) { return nil, errors.New("hold: not supported on this platform") }

// Reader is nil.
func (h *Hold) Reader() *os.File { return nil }

// CloseReader does nothing.
func (h *Hold) CloseReader() {}

// End does nothing.
func (h *Hold) End(error) {}
