package auth

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/store"
)

// countingStore counts key lookups by hash, the query the cache saves.
type countingStore struct {
	store.Store
	byHash atomic.Int64
}

func (c *countingStore) KeyByHash(ctx context.Context, h []byte) (store.Key, error) {
	c.byHash.Add(1)
	return c.Store.KeyByHash(ctx, h)
}

// cachedPair opens one SQLite store in a temp dir and returns two Services
// over it with the same epoch file: server (the daemon) and cli (another
// process, `sandhold keys revoke`), plus server's counting store.
func cachedPair(t *testing.T) (server, cli *Service, counted *countingStore, epochPath string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	epochPath = filepath.Join(dir, "keys.epoch")
	counted = &countingStore{Store: st}
	server = NewService(counted, nil, WithKeyCache(epochPath))
	t.Cleanup(func() { _ = server.Close() })
	// The CLI opens the database itself: its own store handle, as a
	// second process would.
	st2, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	cli = NewService(st2, nil, WithKeyCache(epochPath))
	t.Cleanup(func() { _ = cli.Close() })
	if server.keys == nil || cli.keys == nil {
		t.Fatal("key cache not opened")
	}
	return server, cli, counted, epochPath
}

func mustAuth(t *testing.T, s *Service, key string) Caller {
	t.Helper()
	c, err := s.Authenticate(context.Background(), "127.0.0.1", Credential{Key: key})
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return c
}

func refused(t *testing.T, s *Service, key, why string) {
	t.Helper()
	if _, err := s.Authenticate(context.Background(), "127.0.0.1", Credential{Key: key}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("%s: got %v, want unauthorized", why, err)
	}
}

// TestKeyCacheServesRepeatsWithoutTheStore: the second request of a key
// does not query the store; the Caller is the same, with this request's
// address.
func TestKeyCacheServesRepeatsWithoutTheStore(t *testing.T) {
	server, _, counted, _ := cachedPair(t)
	ctx := context.Background()
	info, key, err := server.CreateKeyWithLimits(ctx, Caller{Role: RoleAdmin}, "a", RoleAgent, "command=2/m")
	if err != nil {
		t.Fatal(err)
	}
	first := mustAuth(t, server, key)
	before := counted.byHash.Load()
	second, err := server.Authenticate(ctx, "10.0.0.9", Credential{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if n := counted.byHash.Load() - before; n != 0 {
		t.Fatalf("a repeated key queried the store %d times", n)
	}
	if second.KeyID != info.ID || second.Role != RoleAgent || second.Addr != "10.0.0.9" ||
		second.RateLimits.String() != first.RateLimits.String() || first.RateLimits == nil {
		t.Fatalf("cached caller %+v, first %+v", second, first)
	}
	// A wrong key is never served from the cache.
	refused(t, server, key+"x", "wrong key")
	if counted.byHash.Load()-before != 1 {
		t.Fatal("a wrong key did not reach the store")
	}
}

// TestKeyCacheRevocationInProcess: a revocation through this Service
// refuses the very next request.
func TestKeyCacheRevocationInProcess(t *testing.T) {
	server, _, _, _ := cachedPair(t)
	ctx := context.Background()
	info, key, _ := server.CreateKey(ctx, Caller{Role: RoleAdmin}, "a", RoleAgent)
	mustAuth(t, server, key)
	mustAuth(t, server, key)
	if _, err := server.RevokeKey(ctx, Caller{Role: RoleAdmin}, info.ID); err != nil {
		t.Fatal(err)
	}
	refused(t, server, key, "revoked in process")
}

// TestKeyCacheRevocationByAnotherProcess: `sandhold keys revoke` beside a
// running server (its own store handle, its own Service) is refused by the
// server on the very next request, though the server had the key cached.
func TestKeyCacheRevocationByAnotherProcess(t *testing.T) {
	server, cli, counted, _ := cachedPair(t)
	ctx := context.Background()
	info, key, _ := cli.CreateKey(ctx, Caller{Role: RoleAdmin}, "a", RoleAgent)
	other, otherKey, _ := cli.CreateKey(ctx, Caller{Role: RoleAdmin}, "b", RoleAgent)
	mustAuth(t, server, key)
	mustAuth(t, server, otherKey)
	before := counted.byHash.Load()
	mustAuth(t, server, key)
	if counted.byHash.Load() != before {
		t.Fatal("precondition: the key is not cached")
	}
	if _, err := cli.RevokeKey(ctx, Caller{Role: RoleAdmin}, info.ID); err != nil {
		t.Fatal(err)
	}
	refused(t, server, key, "revoked by another process")
	// The other key still works (read again from the store once).
	if c := mustAuth(t, server, otherKey); c.KeyID != other.ID {
		t.Fatalf("other key: %+v", c)
	}
}

// TestKeyCacheAdminKeyChangedByAnotherProcess: re-hashing the bootstrap
// admin key (EnsureAdmin with a new key) refuses the old one at once.
func TestKeyCacheAdminKeyChangedByAnotherProcess(t *testing.T) {
	server, cli, _, _ := cachedPair(t)
	ctx := context.Background()
	oldKey, _ := GenerateKey()
	newKey, _ := GenerateKey()
	if err := server.EnsureAdmin(ctx, oldKey); err != nil {
		t.Fatal(err)
	}
	mustAuth(t, server, oldKey)
	mustAuth(t, server, oldKey)
	if err := cli.EnsureAdmin(ctx, newKey); err != nil {
		t.Fatal(err)
	}
	refused(t, server, oldKey, "the replaced admin key")
	mustAuth(t, server, newKey)
}

// TestKeyCacheFailsClosedToTheStore: when the epoch file cannot be read
// the request reads its key from the store (no cached answer).
func TestKeyCacheFailsClosedToTheStore(t *testing.T) {
	server, _, counted, _ := cachedPair(t)
	ctx := context.Background()
	info, key, _ := server.CreateKey(ctx, Caller{Role: RoleAdmin}, "a", RoleAgent)
	mustAuth(t, server, key)
	// Close the descriptor under the cache: reads now fail.
	server.keys.mu.RLock()
	_ = server.keys.f.Close()
	server.keys.mu.RUnlock()
	before := counted.byHash.Load()
	mustAuth(t, server, key)
	if counted.byHash.Load() != before+1 {
		t.Fatal("an unreadable epoch still served from the cache")
	}
	// A revocation written straight to the store is then seen at once.
	if _, err := counted.RevokeKey(ctx, info.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	refused(t, server, key, "revoked while the epoch is unreadable")
}

// TestKeyCacheReplacedEpochFile: a revocation poll notices an epoch file
// replaced under the server and reopens it, so later revocations by the
// CLI (which writes the new file) are seen at once again.
func TestKeyCacheReplacedEpochFile(t *testing.T) {
	server, cli, _, path := cachedPair(t)
	ctx := context.Background()
	info, key, _ := cli.CreateKey(ctx, Caller{Role: RoleAdmin}, "a", RoleAgent)
	mustAuth(t, server, key)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("replaced"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !server.keys.replaced() {
		t.Fatal("a replaced epoch file was not noticed")
	}
	if err := server.keys.reopen(); err != nil {
		t.Fatal(err)
	}
	if err := cli.keys.reopen(); err != nil {
		t.Fatal(err)
	}
	mustAuth(t, server, key)
	if _, err := cli.RevokeKey(ctx, Caller{Role: RoleAdmin}, info.ID); err != nil {
		t.Fatal(err)
	}
	refused(t, server, key, "revoked after the file was replaced")
}

// TestKeyCacheWatchForgetsRevocationsBeforeItsFirstPoll: a key cached
// before the watcher's first list, and revoked by hand before it too, is
// refused once that list is read (the first list takes its revocations as
// known, so it must not leave their cached keys behind).
func TestKeyCacheWatchForgetsRevocationsBeforeItsFirstPoll(t *testing.T) {
	server, _, counted, _ := cachedPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info, key, _ := server.CreateKey(ctx, Caller{Role: RoleAdmin}, "a", RoleAgent)
	mustAuth(t, server, key)
	if _, err := counted.RevokeKey(ctx, info.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); server.WatchRevocations(ctx, time.Hour) }() // one list, then a long wait
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := server.Authenticate(ctx, "127.0.0.1", Credential{Key: key})
		if fault.KindOf(err) == fault.Unauthorized {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a key revoked before the first poll stayed cached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKeyCacheWatchForgetsUnsignalledRevocations: a revocation written
// to the store without the epoch (by hand) is refused after the next
// revocation poll at the latest.
func TestKeyCacheWatchForgetsUnsignalledRevocations(t *testing.T) {
	server, _, counted, _ := cachedPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info, key, _ := server.CreateKey(ctx, Caller{Role: RoleAdmin}, "a", RoleAgent)
	done := make(chan struct{})
	go func() { defer close(done); server.WatchRevocations(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	mustAuth(t, server, key)
	if _, err := counted.RevokeKey(ctx, info.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := server.Authenticate(ctx, "127.0.0.1", Credential{Key: key})
		if fault.KindOf(err) == fault.Unauthorized {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("an unsignalled revocation was never seen")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNoKeyCacheByDefault: without WithKeyCache every request reads its key.
func TestNoKeyCacheByDefault(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	counted := &countingStore{Store: st}
	s := NewService(counted, nil)
	_, key, _ := s.CreateKey(context.Background(), Caller{Role: RoleAdmin}, "a", RoleAgent)
	for range 3 {
		mustAuth(t, s, key)
	}
	if n := counted.byHash.Load(); n != 3 {
		t.Fatalf("lookups = %d, want 3", n)
	}
}
