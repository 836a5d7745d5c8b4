package template

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// The build cache: the key of a build step (its owner, the step and every
// step before it, the content it copies) names the layer the step made, so
// a rebuild reuses it instead of running the step again. Keys are per
// owner: a key's layer is what that owner's step made, never another
// tenant's. An entry whose layer was collected is a miss.

// maxCache bounds the cache's entries (the oldest used go first).
const maxCache = 8192

type cacheEntry struct {
	Layer string    `json:"layer"`
	Used  time.Time `json:"used"`
}

func (s *Store) cachePath() string { return filepath.Join(s.dir, "cache.json") }

// loadCacheLocked reads the cache once. Callers hold s.mu.
func (s *Store) loadCacheLocked() {
	if s.cache != nil {
		return
	}
	s.cache = map[string]cacheEntry{}
	b, err := readCapped(s.cachePath(), maxIndex)
	if err == nil {
		_ = json.Unmarshal(b, &s.cache)
	} else if !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("template build cache unreadable; starting empty", "err", err)
	}
}

// CacheGet returns the layer the step key made, if it is still in the
// store, and holds it for the transaction.
func (t *Txn) CacheGet(key string) (Layer, bool) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadCacheLocked()
	e, ok := s.cache[key]
	if !ok {
		return Layer{}, false
	}
	st, ok := s.layers[e.Layer]
	if !ok {
		return Layer{}, false
	}
	t.holdLocked(e.Layer)
	return Layer{Digest: e.Layer, Bytes: st.Bytes, Entries: st.Entries}, true
}

// CachePut records that the step key made layer.
func (t *Txn) CachePut(key, layer string) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadCacheLocked()
	s.cache[key] = cacheEntry{Layer: layer, Used: time.Now().UTC()}
	if len(s.cache) > maxCache {
		keys := make([]string, 0, len(s.cache))
		for k := range s.cache {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return s.cache[keys[i]].Used.Before(s.cache[keys[j]].Used) })
		for _, k := range keys[:len(keys)-maxCache] {
			delete(s.cache, k)
		}
	}
	b, err := json.Marshal(s.cache)
	if err != nil {
		return err
	}
	return writeAtomic(s.cachePath(), b)
}
