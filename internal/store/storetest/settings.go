// Package storetest holds in-memory stand-ins for parts of the store, for
// unit tests of packages that keep their state in it.
package storetest

import (
	"context"
	"sync"

	"github.com/sandhold/sandhold/internal/store"
)

// Settings is an in-memory settings table (GetSetting/PutSetting). The
// zero value is ready to use.
type Settings struct {
	mu sync.Mutex
	m  map[string][]byte
}

// GetSetting returns the value under k, or store.ErrNotFound.
func (s *Settings) GetSetting(_ context.Context, k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	if !ok {
		return nil, store.ErrNotFound
	}
	return v, nil
}

// PutSetting stores v under k.
func (s *Settings) PutSetting(_ context.Context, k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[k] = append([]byte(nil), v...)
	return nil
}
