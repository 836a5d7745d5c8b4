package auth

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/store"
)

// BenchmarkAuthenticate is the key check of every authenticated request:
// a generated agent key over the embedded SQLite store, read from the
// store each time (store) and through the key cache (cached).
func BenchmarkAuthenticate(b *testing.B) {
	for _, cached := range []bool{false, true} {
		name := "store"
		if cached {
			name = "cached"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			st, err := store.Open(context.Background(), dir)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			var opts []Option
			if cached {
				opts = append(opts, WithKeyCache(filepath.Join(dir, "keys.epoch")))
			}
			s := NewService(st, nil, opts...)
			b.Cleanup(func() { _ = s.Close() })
			ctx := context.Background()
			_, key, err := s.CreateKey(ctx, Caller{Role: RoleAdmin}, "bench", RoleAgent)
			if err != nil {
				b.Fatal(err)
			}
			cred := Credential{Key: key}
			rctx, cancel := context.WithCancel(ctx) // a request's context can be cancelled
			defer cancel()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := s.Authenticate(rctx, "127.0.0.1", cred); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
