package coderun_test

import (
	"testing"
)

// TestClientChosenSessionIDs (issue 14): a stateful execution naming a
// session id the caller does not have yet starts a session with that id
// (AIO: the id is "required when stateful=True to maintain state across
// requests"), on /v1/code/execute and /v1/jupyter/execute. Ids belong to
// their key: another key naming the same id, even in the same sandbox,
// gets a new session of its own and never sees the first one's state.
func TestClientChosenSessionIDs(t *testing.T) {
	s := startServer(t)

	t.Run("code-execute-new-id", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "python", "code": "x = 41", "stateful": true, "session_id": "c1"})
		if d["status"] != "ok" || d["session_id"] != "c1" {
			t.Fatalf("first call with a new id: %v", d)
		}
		d = s.exec(map[string]any{"language": "python", "code": "x + 1", "stateful": true, "session_id": "c1"})
		if got := resultText(d); got != "42" || d["session_id"] != "c1" {
			t.Fatalf("state not kept in c1: %q %v", got, d)
		}
	})

	t.Run("jupyter-execute-new-id", func(t *testing.T) {
		st, out := s.do("POST", "/v1/jupyter/execute", map[string]any{"code": "y = 2", "session_id": "j1"})
		d, _ := out["data"].(map[string]any)
		if st != 200 || out["success"] != true || d["session_id"] != "j1" {
			t.Fatalf("jupyter with a new id: %d %v", st, out)
		}
		st, out = s.do("POST", "/v1/jupyter/execute", map[string]any{"code": "y * 21", "session_id": "j1"})
		d, _ = out["data"].(map[string]any)
		if st != 200 || resultText(d) != "42" {
			t.Fatalf("state not kept in j1: %d %v", st, out)
		}
		st, out = s.do("GET", "/v1/jupyter/sessions", nil)
		if ss, _ := out["data"].(map[string]any)["sessions"].(map[string]any); st != 200 || ss["j1"] == nil {
			t.Fatalf("j1 not listed: %d %v", st, out)
		}
	})

	t.Run("another-keys-id-is-a-new-session", func(t *testing.T) {
		st, out := s.do("POST", "/v1/keys", map[string]any{"name": "bob", "role": "agent"})
		if st != 201 {
			t.Fatalf("create key: %d %v", st, out)
		}
		bob := &srv{t: t, base: s.base, key: out["data"].(map[string]any)["key"].(string)}
		d := bob.exec(map[string]any{"language": "python", "code": "secret = 'bob'", "stateful": true, "session_id": "shared"})
		if d["status"] != "ok" {
			t.Fatalf("bob: %v", d)
		}
		st, out = bob.do("GET", "/v1/sandboxes", nil)
		list, _ := out["data"].([]any)
		if st != 200 || len(list) != 1 {
			t.Fatalf("bob's sandboxes: %d %v", st, out)
		}
		sb := list[0].(map[string]any)["id"].(string)
		// The admin names bob's id in bob's sandbox: a session of its own.
		st, out = s.do("POST", "/sandboxes/"+sb+"/v1/code/execute",
			map[string]any{"language": "python", "code": "print(secret)", "stateful": true, "session_id": "shared"})
		d, _ = out["data"].(map[string]any)
		if st != 200 || d["status"] != "error" || d["stdout"] == "bob\n" {
			t.Fatalf("the admin reached bob's session state: %d %v", st, out)
		}
		d = bob.exec(map[string]any{"language": "python", "code": "secret", "stateful": true, "session_id": "shared"})
		if got := resultText(d); got != "'bob'" {
			t.Fatalf("bob's session was disturbed: %q %v", got, d)
		}
	})
}
