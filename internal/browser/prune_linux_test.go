package browser

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/sandbox"
)

// TestManagerForgetsDeletedSandboxes: sandboxes that asked about their
// browser (and never started one) and were then deleted leave nothing in
// the manager: 20 of them in a row keep it at one entry at most.
func TestManagerForgetsDeletedSandboxes(t *testing.T) {
	sm, bm := newManagersWith(t, 64, 512)
	ctx := context.Background()
	for i := range 20 {
		id := newSandbox(t, sm, ownerA)
		if _, err := bm.Status(ctx, ownerA, id); err != nil {
			t.Fatalf("status %d: %v", i, err)
		}
		if err := sm.Delete(ctx, sandbox.CallerOf(ownerA), id); err != nil {
			t.Fatal(err)
		}
	}
	if n := bm.Entries(); n > 1 {
		t.Fatalf("the manager keeps %d entries after 20 deleted sandboxes, want at most 1", n)
	}
	// Forget drops the last one at once.
	id := newSandbox(t, sm, ownerA)
	if _, err := bm.Status(ctx, ownerA, id); err != nil {
		t.Fatal(err)
	}
	if err := sm.Delete(ctx, sandbox.CallerOf(ownerA), id); err != nil {
		t.Fatal(err)
	}
	bm.Forget(id)
	if n := bm.Entries(); n > 1 {
		t.Fatalf("after Forget: %d entries", n)
	}
}
