package daemon

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/testenv"
)

// TestRevocationEndsEverythingTheKeyHolds: revoking a key cancels its
// open exec stream, kills its background execution and its shell
// session's shell, and stops its sandbox — whose workspace an admin still
// finds — and says so in one audit record.
func TestRevocationEndsEverythingTheKeyHolds(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), func(c *config.Config) { c.DisableRateLimit = true })
	admin := s.d.AdminKey()
	ag := s.createKey("doomed", "agent")
	var sb struct{ ID string }
	expectOK(t, s.do("POST", "/v1/sandboxes", ag.Key, map[string]any{"name": "r"}, nil), 201, &sb)
	execPath := "/v1/sandboxes/" + sb.ID + "/exec"
	expectOK(t, s.do("POST", execPath, ag.Key, map[string]any{"command": "echo kept > /workspace/f"}, nil), 200, nil)
	var bg struct {
		ID string `json:"command_id"`
	}
	expectOK(t, s.do("POST", execPath, ag.Key, map[string]any{"command": "sleep 300", "background": true}, nil), 200, &bg)
	sess := s.do("POST", "/sandboxes/"+sb.ID+"/v1/shell/sessions/create", ag.Key, map[string]any{}, nil)
	if sess.status != 200 {
		t.Fatalf("create shell session: %d %s", sess.status, sess.raw)
	}

	// An exec stream that would tick for a minute.
	body, _ := json.Marshal(map[string]any{"command": "while :; do echo tick; sleep 0.1; done", "timeout": 60})
	req, _ := http.NewRequest("POST", s.base+execPath, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+ag.Key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() && !strings.Contains(lines.Text(), "tick") {
	}
	streamEnded := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(streamEnded)
	}()

	expectOK(t, s.do("DELETE", "/v1/keys/"+ag.ID, admin, nil, nil), 200, nil)

	// Generous bounds: without revocation each of these runs a minute or more.
	select {
	case <-streamEnded:
	case <-time.After(15 * time.Second):
		t.Fatal("the revoked key's exec stream is still open")
	}
	testenv.Eventually(t, "sandbox stopped", func() bool {
		var info struct{ State string }
		expectOK(t, s.do("GET", "/v1/sandboxes/"+sb.ID, admin, nil, nil), 200, &info)
		return info.State == "stopped"
	})
	testenv.Eventually(t, "revocation audited", func() bool {
		for _, a := range s.auditActions(audit.Filter{Action: "key.revoke.end"}) {
			if a == "key.revoke.end" {
				return true
			}
		}
		return false
	})
	var ex struct{ Status string }
	expectOK(t, s.do("GET", execPath+"/"+bg.ID, admin, nil, nil), 200, &ex)
	if ex.Status == "running" {
		t.Fatalf("background execution still %s", ex.Status)
	}
	if n := s.d.inflight.count(); n != 0 {
		t.Errorf("%d requests still tracked", n)
	}
	// The key is refused, and the workspace is kept for an admin (the
	// sandbox starts again on the admin's use, with no old processes).
	if r := s.do("GET", "/v1/sandboxes/"+sb.ID, ag.Key, nil, nil); r.status != 401 {
		t.Fatalf("revoked key: %d", r.status)
	}
	var out struct{ Stdout, Stderr string }
	expectOK(t, s.do("POST", execPath, admin, map[string]any{"command": "cat /workspace/f; cat /proc/[0-9]*/comm 2>/dev/null | grep -cx sleep || true"}, nil), 200, &out)
	if out.Stdout != "kept\n0\n" {
		t.Fatalf("after revocation: %q (stderr %q), want the kept file and no sleep left", out.Stdout, out.Stderr)
	}
}
