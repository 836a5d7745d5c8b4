package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"
)

// BenchmarkKeyByHash is the key check's store read on a key-cache miss
// (the first request of a key, or the first after a revocation anywhere),
// with 100 keys in the table and a request's cancellable context: a key
// that exists (hit) and one that does not (miss: a wrong key).
func BenchmarkKeyByHash(b *testing.B) {
	s, err := Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	var hashes [][]byte
	for i := range 100 {
		h := sha256.Sum256(fmt.Appendf(nil, "key-%d", i))
		if err := s.CreateKey(ctx, Key{ID: fmt.Sprintf("key_%d", i), Name: "bench", Role: "agent", Hash: h[:], CreatedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, h[:])
	}
	unknown := sha256.Sum256([]byte("no such key"))
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := s.KeyByHash(rctx, hashes[i%len(hashes)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := s.KeyByHash(rctx, unknown[:]); !errors.Is(err, ErrNotFound) {
				b.Fatalf("unknown key: %v", err)
			}
		}
	})
}
