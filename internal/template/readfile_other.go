//go:build !linux

package template

import "errors"

// ReadFile fails off Linux: the store's layers need openat2.
func (s *Store) ReadFile([]Layer, string, int64) ([]byte, error) {
	return nil, errors.New("template: reading a template's files needs Linux")
}

// Has says no off Linux.
func (s *Store) Has([]Layer, string) bool { return false }

// IsDir says no off Linux.
func (s *Store) IsDir([]Layer, string) bool { return false }

// Attr is an entry's owner and mode as a template's tree has it.
type Attr struct {
	Mode     uint32
	UID, GID int
	Dir      bool
}

// Stat finds nothing off Linux.
func (s *Store) Stat([]Layer, string) (Attr, bool) { return Attr{}, false }
