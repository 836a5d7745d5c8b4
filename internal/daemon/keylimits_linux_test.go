package daemon

import (
	"strconv"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestKeyOwnRateLimits: an admin creates a key with command=2/m; its 3rd
// command in a minute gets 429 (with the key's figures in X-RateLimit-*),
// another key is unaffected, listing shows the limits, they survive a
// restart, and neither an agent nor a value above the server's limit gets
// through.
func TestKeyOwnRateLimits(t *testing.T) {
	testenv.RequireSandboxes(t)
	dir := t.TempDir()
	cfg := func(c *config.Config) { c.WarmPool = 0 }
	s := start(t, dir, cfg)
	admin := s.d.AdminKey()

	var limited struct {
		ID, Key    string
		RateLimits string `json:"rate_limits"`
	}
	expectOK(t, s.do("POST", "/v1/keys", admin, map[string]string{"name": "slow", "role": "agent", "rate_limits": "command=2/m"}, nil), 201, &limited)
	if limited.RateLimits != "command=2/m:2" {
		t.Fatalf("created key's limits %q", limited.RateLimits)
	}
	other := s.createKey("other", "agent")

	// Refusals: an agent may not create keys (let alone limited ones); a
	// limit above the server's is a 422 naming the field.
	expectError(t, s.do("POST", "/v1/keys", other.Key, map[string]string{"name": "x", "role": "agent", "rate_limits": "command=1/m"}, nil), 403, "forbidden")
	if d := expectError(t, s.do("POST", "/v1/keys", admin, map[string]string{"name": "x", "role": "agent", "rate_limits": "command=301/m"}, nil), 422, "unprocessable"); d.Field != "body.rate_limits" {
		t.Fatalf("422 field %q", d.Field)
	}

	var keys []struct {
		ID         string `json:"id"`
		RateLimits string `json:"rate_limits"`
	}
	expectOK(t, s.do("GET", "/v1/keys", admin, nil, nil), 200, &keys)
	shown := map[string]string{}
	for _, k := range keys {
		shown[k.ID] = k.RateLimits
	}
	if shown[limited.ID] != "command=2/m:2" || shown[other.ID] != "" {
		t.Fatalf("listed limits %v", shown)
	}

	commands := func(s *server, key, sb string, n int) {
		t.Helper()
		for i := range n {
			r := s.do("POST", "/v1/sandboxes/"+sb+"/exec", key, map[string]any{"command": "true"}, nil)
			if r.status != 200 {
				t.Fatalf("command %d of %d: %d %s", i+1, n, r.status, r.raw)
			}
		}
	}
	sbLimited := s.createSandbox(limited.Key, nil)
	sbOther := s.createSandbox(other.Key, nil)
	commands(s, limited.Key, sbLimited, 2)
	r := s.do("POST", "/v1/sandboxes/"+sbLimited+"/exec", limited.Key, map[string]any{"command": "true"}, nil)
	expectError(t, r, 429, "rate_limited")
	checkLimitHeaders(t, r, "2")
	commands(s, other.Key, sbOther, 5)
	r = s.do("POST", "/v1/sandboxes/"+sbOther+"/exec", other.Key, map[string]any{"command": "true"}, nil)
	if rem, err := strconv.Atoi(r.header.Get("X-RateLimit-Remaining")); r.status != 200 || r.header.Get("X-RateLimit-Limit") != "60" || err != nil || rem < 50 {
		t.Fatalf("the other key: %d %v", r.status, r.header)
	}

	// A restart starts with full buckets; the stored limits still hold.
	s.stop()
	s2 := start(t, dir, cfg)
	sb2 := s2.createSandbox(limited.Key, nil)
	commands(s2, limited.Key, sb2, 2)
	r = s2.do("POST", "/v1/sandboxes/"+sb2+"/exec", limited.Key, map[string]any{"command": "true"}, nil)
	expectError(t, r, 429, "rate_limited")
	checkLimitHeaders(t, r, "2")
}
