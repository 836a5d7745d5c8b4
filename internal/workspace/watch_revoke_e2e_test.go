package workspace_test

import (
	"encoding/json"
	"testing"
	"time"
)

// TestWatchesEndWithTheirKey: watches live in the one session table, so
// revoking a key stops the watches it started (before, a watch polled on
// for up to 10 minutes after its key was revoked), and a key's watches
// are counted against its caps.
func TestWatchesEndWithTheirKey(t *testing.T) {
	s := start(t, nil)
	agent := s.c.NewKey("watcher", "agent")
	ac := s.c.As(agent.Key)
	id := ac.NewSandbox(map[string]any{"name": "w"})
	s.sh(id, "mkdir -p /workspace/w")
	p := "/sandboxes/" + id + "/v1/file/watch"
	r := ac.Do("POST", p, map[string]any{"path": "/workspace/w"})
	var env struct {
		Success bool `json:"success"`
		Data    struct {
			WatcherID string `json:"watcher_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Raw, &env); err != nil || !env.Success || env.Data.WatcherID == "" {
		t.Fatalf("watch: %d %s", r.Status, r.Raw)
	}
	list := func() []any {
		var out struct {
			Data struct {
				Watches []any `json:"watches"`
			} `json:"data"`
		}
		rr := s.c.Do("GET", p, nil)
		if err := json.Unmarshal(rr.Raw, &out); err != nil {
			t.Fatalf("list: %d %s", rr.Status, rr.Raw)
		}
		return out.Data.Watches
	}
	if got := list(); len(got) != 1 {
		t.Fatalf("watches before the revocation: %v", got)
	}
	if rr := s.c.Do("DELETE", "/v1/keys/"+agent.ID, nil); rr.Status != 200 {
		t.Fatalf("revoke: %d %s", rr.Status, rr.Raw)
	}
	// Revocation ends a key's holdings in the background (the revoke
	// answer does not wait for it): wait for it, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := list()
		if len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key's watch lives on: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
