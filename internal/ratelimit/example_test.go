package ratelimit_test

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sandhold/sandhold/internal/ratelimit"
)

// The caller resolves the rules for a key's role and overrides, asks for a
// decision, and maps a refusal to 429 with these header values.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := ratelimit.New(ratelimit.Options{
		Roles: map[string]ratelimit.Rules{"admin": {ratelimit.Exec: {PerMinute: 60, Burst: 20}}},
		Now:   func() time.Time { return now },
	})
	rules := lim.Resolve("agent", nil)
	var d ratelimit.Decision
	for range 11 {
		d = lim.AllowRule("key-1", ratelimit.Exec, rules[ratelimit.Exec])
	}
	fmt.Println("allowed:", d.Allowed)
	fmt.Println("Retry-After:", d.RetryAfterSeconds())
	fmt.Println("X-RateLimit-Limit:", d.Limit)
	fmt.Println("X-RateLimit-Remaining:", d.Remaining)
	fmt.Println("X-RateLimit-Reset:", strconv.FormatInt(d.Reset.Unix()-now.Unix(), 10), "s from now")

	release, t := lim.Acquire("key-1", ratelimit.Terminal)
	defer release()
	fmt.Println("terminal allowed:", t.Allowed, "remaining:", t.Remaining)
	// Output:
	// allowed: false
	// Retry-After: 6
	// X-RateLimit-Limit: 10
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 60 s from now
	// terminal allowed: true remaining: 4
}
