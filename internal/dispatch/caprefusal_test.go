package dispatch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// TestCapRefusalLooksLikeARateLimit: a capability's own cap refuses as
// the dispatcher's limits do — a 429 with the message given, Retry-After
// in whole seconds, and the category and cap an edge sets its headers
// from.
func TestCapRefusalLooksLikeARateLimit(t *testing.T) {
	err := dispatch.CapRefusal(ratelimit.Sandboxes, 3, 1500*time.Millisecond, "at most 3 sandboxes per key")
	var fe *fault.Error
	var rl *dispatch.RateLimited
	if !errors.As(err, &fe) || fe.Kind != fault.RateLimited || fe.Msg != "at most 3 sandboxes per key" || fe.RetryAfter != 2 {
		t.Fatalf("got %#v, want a 429 with its message and Retry-After 2", err)
	}
	if !errors.As(err, &rl) || rl.Category != ratelimit.Sandboxes || rl.Decision.Limit != 3 || rl.Decision.Remaining != 0 || rl.Decision.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("the decision inside: %+v", rl)
	}
}
