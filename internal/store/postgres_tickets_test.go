package store

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/store/pgtest"
)

// A ticket stored through one node is taken through another exactly once,
// not after it expired, not after its key's tickets were dropped; the caps
// hold across nodes.
func TestPostgresTicketsAreSharedAndSingleUse(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	open := func(node string) *Postgres {
		s, err := OpenPostgres(ctx, url, WithNode(node))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open("node-a"), open("node-b")
	now := time.Unix(1_700_000_000, 0)
	h := func(s string) []byte { x := sha256.Sum256([]byte(s)); return x[:] }

	if ok, err := a.AddTicket(ctx, h("t1"), "key_1", now.Add(30*time.Second), now, 10, 5); err != nil || !ok {
		t.Fatalf("add: %v %v", ok, err)
	}
	// Two nodes race to take it: one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for _, s := range []*Postgres{a, b, a, b} {
		wg.Go(func() {
			if id, ok, err := s.TakeTicket(ctx, h("t1"), now.Add(time.Second)); err != nil {
				t.Error(err)
			} else if ok {
				if id != "key_1" {
					t.Errorf("taken for %q", id)
				}
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("ticket taken %d times", wins.Load())
	}

	// Expired: refused (and gone).
	if ok, _ := a.AddTicket(ctx, h("t2"), "key_1", now.Add(30*time.Second), now, 10, 5); !ok {
		t.Fatal("add t2")
	}
	if _, ok, err := b.TakeTicket(ctx, h("t2"), now.Add(30*time.Second)); ok || err != nil {
		t.Fatalf("expired ticket taken: %v %v", ok, err)
	}

	// A revoked key's tickets are dropped everywhere.
	if ok, _ := a.AddTicket(ctx, h("t3"), "key_2", now.Add(30*time.Second), now, 10, 5); !ok {
		t.Fatal("add t3")
	}
	if err := b.DropKeyTickets(ctx, "key_2"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.TakeTicket(ctx, h("t3"), now); ok {
		t.Fatal("a dropped key's ticket was taken")
	}

	// Caps: per key, then in total, counted across nodes; expired ones
	// make room again.
	for i := range 2 {
		s := []*Postgres{a, b}[i]
		if ok, err := s.AddTicket(ctx, h("k3-"+string(rune('a'+i))), "key_3", now.Add(10*time.Second), now, 3, 2); err != nil || !ok {
			t.Fatalf("add %d: %v %v", i, ok, err)
		}
	}
	if ok, _ := a.AddTicket(ctx, h("k3-c"), "key_3", now.Add(10*time.Second), now, 3, 2); ok {
		t.Fatal("per-key cap not held across nodes")
	}
	if ok, _ := b.AddTicket(ctx, h("k4-a"), "key_4", now.Add(10*time.Second), now, 3, 2); !ok {
		t.Fatal("another key under the total cap was refused")
	}
	if ok, _ := b.AddTicket(ctx, h("k5-a"), "key_5", now.Add(10*time.Second), now, 3, 2); ok {
		t.Fatal("total cap not held")
	}
	if ok, _ := b.AddTicket(ctx, h("k5-a"), "key_5", now.Add(40*time.Second), now.Add(10*time.Second), 3, 2); !ok {
		t.Fatal("expired tickets did not make room")
	}
}
