package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/orphan"
)

// TestLostSandboxIsTheOwnersToKnow: a request the cluster's forwarder
// served here for a running sandbox of a dead node (orphan.WithLost) answers,
// once authenticated, 503 "lost" to the key that owns the sandbox and to
// admins, and NotFound — the answer for an id nobody has — to any other
// key. Nothing is taken over (adopt is never called).
func TestLostSandboxIsTheOwnersToKnow(t *testing.T) {
	m := &Manager{}
	marked := orphan.WithLost(context.Background(), "sbl", "node-c", "k-owner")
	tests := []struct {
		name string
		ctx  context.Context
		c    Caller
		id   string
		want fault.Kind
	}{
		{"the owner", marked, Caller{KeyID: "k-owner"}, "sbl", fault.Unavailable},
		{"an admin", marked, Caller{KeyID: "k-admin", Admin: true}, "sbl", fault.Unavailable},
		{"another key", marked, Caller{KeyID: "k-other"}, "sbl", fault.NotFound},
		{"another id in a marked request", marked, Caller{KeyID: "k-owner"}, "sbx", fault.NotFound},
		{"an unmarked request", context.Background(), Caller{KeyID: "k-owner"}, "sbl", fault.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.getOrAdopt(tc.ctx, tc.c, tc.id, func(error) error {
				t.Fatal("a lost sandbox was offered for take-over")
				return nil
			})
			if got := fault.KindOf(err); got != tc.want {
				t.Fatalf("kind %v (%v), want %v", got, err, tc.want)
			}
			msg := fault.Public(err)
			if lost := strings.Contains(msg, "lost"); lost != (tc.want == fault.Unavailable) {
				t.Fatalf("answer %q: says lost = %v", msg, lost)
			}
			if tc.want == fault.NotFound && !errors.Is(err, ErrNoSandbox) {
				t.Fatalf("answer %v is not Get's NotFound", err)
			}
		})
	}
}
