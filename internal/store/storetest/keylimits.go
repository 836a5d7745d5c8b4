package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// testKeyRateLimits: a key's own rate limits are stored with it, read back
// by every lookup and listing, and survive closing and reopening the store
// (a restart of the server).
func testKeyRateLimits(t *testing.T, s store.Store, open Opener) {
	ctx := context.Background()
	now := time.Unix(1700000000, 0).UTC()
	limited := store.Key{ID: "key_lim", Name: "limited", Role: "agent", Hash: []byte("hl"), CreatedAt: now, RateLimits: "command=2/m:2"}
	plain := store.Key{ID: "key_plain", Name: "plain", Role: "agent", Hash: []byte("hp"), CreatedAt: now.Add(time.Second)}
	for _, k := range []store.Key{limited, plain} {
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := open(ctx)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() { _ = s2.Close() }()
	if k, err := s2.KeyByHash(ctx, []byte("hl")); err != nil || k.RateLimits != "command=2/m:2" {
		t.Fatalf("KeyByHash after reopen = %+v, %v", k, err)
	}
	if k, err := s2.KeyByID(ctx, "key_plain"); err != nil || k.RateLimits != "" {
		t.Fatalf("KeyByID of a key without limits = %+v, %v", k, err)
	}
	list, err := s2.ListKeys(ctx)
	if err != nil || len(list) != 2 || list[0].RateLimits != "command=2/m:2" || list[1].RateLimits != "" {
		t.Fatalf("ListKeys = %+v, %v", list, err)
	}
	// Revoking keeps the limits (the record stays readable for listing).
	if k, err := s2.RevokeKey(ctx, "key_lim", now.Add(time.Hour)); err != nil || k.RateLimits != "command=2/m:2" {
		t.Fatalf("RevokeKey = %+v, %v", k, err)
	}
}
