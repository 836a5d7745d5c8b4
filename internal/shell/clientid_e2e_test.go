package shell_test

import (
	"strings"
	"testing"
)

// TestClientChosenSessionIDs (issue 14): shell/exec with an id and
// bash/exec with a session_id the caller does not have yet start a
// session with that id instead of answering "not found"; ids belong to
// their key, so another key naming the same id in the same sandbox gets a
// session of its own.
func TestClientChosenSessionIDs(t *testing.T) {
	s := startServer(t, nil)

	t.Run("shell-exec-new-id", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": "s1", "command": "export DEMO=seven"}))
		if d["session_id"] != "s1" {
			t.Fatalf("session %v, want s1", d["session_id"])
		}
		d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": "s1", "command": `echo "[$DEMO]"`}))
		if out, _ := d["output"].(string); !strings.Contains(out, "[seven]") {
			t.Fatalf("state not kept in s1: %v", d)
		}
		list := ok(t, s.do("GET", "/v1/shell/sessions", nil))
		if list["sessions"].(map[string]any)["s1"] == nil {
			t.Fatalf("s1 not listed: %v", list)
		}
	})

	t.Run("bash-exec-new-id", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"session_id": "b1", "command": "pwd", "exec_dir": "/tmp"}))
		if d["session_id"] != "b1" || d["stdout"] != "/tmp\n" {
			t.Fatalf("bash with a new id: %v", d)
		}
		d = ok(t, s.do("POST", "/v1/bash/output", map[string]any{"session_id": "b1"}))
		if d["session_id"] != "b1" {
			t.Fatalf("output of b1: %v", d)
		}
	})

	t.Run("malformed-ids", func(t *testing.T) {
		for _, c := range []struct{ path, body string }{
			{"/v1/shell/exec", `{"id":"../x","command":"true"}`},
			{"/v1/shell/exec", `{"id":"a b","command":"true"}`},
			{"/v1/bash/exec", `{"session_id":"-x","command":"true"}`},
		} {
			if r := s.do("POST", c.path, c.body); r.status != 422 {
				t.Errorf("%s %s: %d %s, want 422", c.path, c.body, r.status, r.raw)
			}
		}
	})

	t.Run("another-keys-id-is-a-new-session", func(t *testing.T) {
		bob := s.newKey("bob", "agent")
		ok(t, s.call(bob, "POST", "/v1/shell/exec", map[string]any{"id": "shared", "command": "export SECRET=bob"}))
		sbs := s.call(bob, "GET", "/v1/sandboxes", nil)
		list, _ := sbs.body["data"].([]any)
		if len(list) != 1 {
			t.Fatalf("bob's sandboxes: %s", sbs.raw)
		}
		sb := list[0].(map[string]any)["id"].(string)
		// The admin names bob's id in bob's sandbox: a session of its own.
		d := ok(t, s.do("POST", "/sandboxes/"+sb+"/v1/shell/exec", map[string]any{"id": "shared", "command": `echo "[$SECRET]"`}))
		if out, _ := d["output"].(string); !strings.Contains(out, "[]") {
			t.Fatalf("the admin reached bob's session: %v", d)
		}
		d = ok(t, s.call(bob, "POST", "/v1/shell/exec", map[string]any{"id": "shared", "command": `echo "[$SECRET]"`}))
		if out, _ := d["output"].(string); !strings.Contains(out, "[bob]") {
			t.Fatalf("bob's session was disturbed: %v", d)
		}
	})
}
