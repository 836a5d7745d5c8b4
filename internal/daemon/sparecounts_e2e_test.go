package daemon

import (
	"encoding/json"
	"testing"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestSpareCountsAreForOperators: the spare inits' counts of cold creates
// (pool.spares taken and missed) count every key's creates, so the
// security report shows them to an admin and leaves them out of an
// agent's, which would otherwise see how many sandboxes other keys make.
func TestSpareCountsAreForOperators(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.WarmPool = 0; c.SpareInits = 1 })
	admin := s.d.AdminKey()
	agent := s.createKey("agent", "agent")
	expectOK(t, s.do("POST", "/v1/sandboxes", admin, map[string]any{}, nil), 201, nil)
	spares := func(key string) map[string]json.RawMessage {
		t.Helper()
		var rep struct {
			Pool struct {
				Spares map[string]json.RawMessage `json:"spares"`
			} `json:"pool"`
		}
		expectOK(t, s.do("GET", "/v1/sandbox/security", key, nil, nil), 200, &rep)
		return rep.Pool.Spares
	}
	if sp := spares(admin); sp["taken"] == nil && sp["missed"] == nil {
		t.Fatalf("an admin's report after a cold create counts none: %v", sp)
	}
	if sp := spares(agent.Key); sp["taken"] != nil || sp["missed"] != nil || sp["target"] == nil {
		t.Fatalf("an agent's report shows %v, want the target and no counts", sp)
	}
}
