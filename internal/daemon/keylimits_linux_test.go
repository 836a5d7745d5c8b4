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

// TestAIORateLimitCategories (issue 14, "rate limits a real agent can live
// with"): on AIO's routes /v1/code, /v1/jupyter and /v1/nodejs share the
// code bucket, commands (bash) have their own, successful answers carry
// X-RateLimit-*, and a refusal keeps its real status (429, and 403 for a
// role refusal) instead of AIO's 200 with success:false. A key limited to
// code=3/m keeps the test short.
func TestAIORateLimitCategories(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0 })
	var k struct{ Key string }
	expectOK(t, s.do("POST", "/v1/keys", s.d.AdminKey(), map[string]string{"name": "coder", "role": "agent", "rate_limits": "code=3/m"}, nil), 201, &k)
	id := s.createSandbox(k.Key, nil)
	p := "/sandboxes/" + id + "/v1/"
	for i, call := range []struct {
		path string
		body map[string]any
	}{
		{"code/execute", map[string]any{"language": "python", "code": "print(1)"}},
		{"jupyter/execute", map[string]any{"code": "1 + 1"}},
		{"nodejs/execute", map[string]any{"code": "1 + 1"}},
	} {
		r := s.do("POST", p+call.path, k.Key, call.body, nil)
		if r.status != 200 || r.env.Success == nil || !*r.env.Success {
			t.Fatalf("%s: %d %s", call.path, r.status, r.raw)
		}
		if r.header.Get("X-RateLimit-Limit") != "3" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(2-i) || r.header.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("%s: rate-limit headers %v, want limit 3, remaining %d", call.path, r.header, 2-i)
		}
	}
	r := s.do("POST", p+"code/execute", k.Key, map[string]any{"language": "python", "code": "print(1)"}, nil)
	if r.status != 429 || r.env.Success == nil || *r.env.Success {
		t.Fatalf("4th code execution: %d %s, want 429", r.status, r.raw)
	}
	checkLimitHeaders(t, r, "3")
	// Commands count apart: the code bucket being empty does not touch them.
	r = s.do("POST", p+"bash/exec", k.Key, map[string]any{"command": "echo ok"}, nil)
	if r.status != 200 || r.header.Get("X-RateLimit-Limit") != "60" {
		t.Fatalf("bash after the code limit: %d %v %s", r.status, r.header, r.raw)
	}
	// A role refusal on an AIO route is a real 403, not success:false.
	viewer := s.createKey("viewer", "viewer")
	r = s.do("POST", "/v1/bash/exec", viewer.Key, map[string]any{"command": "echo no"}, nil)
	if r.status != 403 || r.env.Success == nil || *r.env.Success {
		t.Fatalf("viewer on bash/exec: %d %s, want 403", r.status, r.raw)
	}
}
