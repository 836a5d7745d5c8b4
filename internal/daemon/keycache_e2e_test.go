package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/store"
)

// TestRevocationBesideTheServerRefusesTheNextRequest: the server caches
// keys that authenticated; `sandhold keys revoke` run beside it (its own
// store handle and auth service over the same data dir, as the CLI opens
// them) still refuses the key's very next request, with no poll between.
func TestRevocationBesideTheServerRefusesTheNextRequest(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir, nil)
	ag := s.createKey("cached", "agent")
	for range 3 { // authenticated, and from then on served from the cache
		expectOK(t, s.do("GET", "/v1/sandboxes", ag.Key, nil, nil), 200, nil)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	cli := auth.NewService(st, audit.New(st, dir), auth.WithKeyCache(filepath.Join(dir, auth.KeyEpochFile)))
	defer func() { _ = cli.Close() }()
	if _, err := cli.RevokeKey(ctx, auth.Caller{KeyID: "cli", Role: auth.RoleAdmin}, ag.ID); err != nil {
		t.Fatal(err)
	}
	if r := s.do("GET", "/v1/sandboxes", ag.Key, nil, nil); r.status != 401 {
		t.Fatalf("the request after a revocation beside the server: %d %s", r.status, r.raw)
	}
}
