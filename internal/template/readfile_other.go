//go:build !linux

package template

import "errors"

// ReadFile fails off Linux: the store's layers need openat2.
func (s *Store) ReadFile([]Layer, string, int64) ([]byte, error) {
	return nil, errors.New("template: reading a template's files needs Linux")
}

// Has says no off Linux.
func (s *Store) Has([]Layer, string) bool { return false }
