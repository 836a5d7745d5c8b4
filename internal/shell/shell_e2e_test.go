package shell_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/testenv"
)

// TestShellSessions drives /v1/shell through the real server and real
// sandboxes.
func TestShellSessions(t *testing.T) {
	s := startServer(t, nil)

	t.Run("cwd-and-env-persist", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"command": "mkdir -p /tmp/w && cd /tmp/w && export DEMO_FLAG=hello"}))
		sid, _ := d["session_id"].(string)
		if sid == "" || d["status"] != "completed" || d["exit_code"] != float64(0) {
			t.Fatalf("first exec: %v", d)
		}
		d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "pwd; echo \"$DEMO_FLAG\"; false"}))
		if d["output"] != "/tmp/w\nhello\n" || d["exit_code"] != float64(1) {
			t.Fatalf("second exec: %#v", d)
		}
		// Quotes, backslashes, control bytes and a multi-line script
		// arrive intact; a long command crosses the terminal's line limit.
		long := strings.Repeat("x", 9000)
		cmd := "printf '%s\\n' 'it'\"'\"'s' 'a\\b' $'tab\\there'\nif true; then\n  echo multi\nfi\necho " + long + " | wc -c"
		d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": cmd}))
		if want := "it's\na\\b\ntab\there\nmulti\n9001\n"; d["output"] != want {
			t.Fatalf("output %q, want %q", d["output"], want)
		}
		d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "pwd", "exec_dir": "/workspace"}))
		if d["output"] != "/workspace\n" {
			t.Fatalf("exec_dir: %v", d)
		}
		testenv.Eventually(t, "shell.finish audited", func() bool {
			a := s.do("GET", "/v1/audit?action=shell.finish", nil)
			return a.status == 200 && strings.Contains(string(a.raw), "DEMO_FLAG") && !strings.Contains(string(a.raw), "/tmp/w\\nhello")
		})
		list := ok(t, s.do("GET", "/v1/shell/sessions", nil))
		in, _ := list["sessions"].(map[string]any)[sid].(map[string]any)
		if in == nil || in["working_dir"] != "/workspace" || in["owner"] != "key_admin" || in["sandbox"] == "" {
			t.Fatalf("monitoring view: %v", list)
		}
	})

	t.Run("no-change-timeout-then-write", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/shell/sessions/create", map[string]any{"no_change_timeout": 1}))
		sid := d["session_id"].(string)
		d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "echo ask; read name; echo \"got $name\""}))
		if d["status"] != "no_change_timeout" || !strings.Contains(d["output"].(string), "ask") {
			t.Fatalf("interactive program: %v", d)
		}
		// A second command while one waits is refused.
		toolFailed(t, "exec while running", s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "true"}))
		ok(t, s.do("POST", "/v1/shell/write", map[string]any{"id": sid, "input": "sandhold", "press_enter": true}))
		// The session's window (1 s) applies to the wait too: a program
		// slower than that to answer (a loaded host) is reported
		// no_change_timeout, and the client waits again.
		testenv.Eventually(t, "the command completes after its input", func() bool {
			w := ok(t, s.do("POST", "/v1/shell/wait", map[string]any{"id": sid, "seconds": 30}))
			if w["status"] != "completed" && w["status"] != "no_change_timeout" {
				t.Fatalf("wait: %v", w)
			}
			return w["status"] == "completed"
		})
		v := ok(t, s.do("POST", "/v1/shell/view", map[string]any{"id": sid}))
		if !strings.Contains(v["output"].(string), "got sandhold") || v["exit_code"] != float64(0) {
			t.Fatalf("view: %v", v)
		}
	})

	t.Run("hard-timeout-kills-a-sigterm-ignoring-program", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/shell/sessions/create", map[string]any{}))
		sid := d["session_id"].(string)
		cmd := `bash -c 'trap "" TERM INT HUP; echo started; while :; do sleep 0.2; done'`
		d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": cmd, "hard_timeout": 1}))
		if d["status"] != "hard_timeout" || !strings.Contains(d["output"].(string), "started") {
			t.Fatalf("hard timeout: %v", d)
		}
		// A loop in the session shell itself is interrupted too, and the
		// session survives both.
		d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "while :; do :; done", "hard_timeout": 1}))
		if d["status"] != "hard_timeout" {
			t.Fatalf("builtin loop: %v", d)
		}
		d = ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "echo alive; ps -e -o comm= | grep -c sleep"}))
		if d["output"] != "alive\n0\n" {
			t.Fatalf("after hard timeouts: %v", d)
		}
	})

	t.Run("async-then-kill", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"command": "sleep 300", "async_mode": true}))
		sid := d["session_id"].(string)
		if d["status"] != "running" {
			t.Fatalf("async: %v", d)
		}
		k := ok(t, s.do("POST", "/v1/shell/kill", map[string]any{"id": sid}))
		if k["status"] != "terminated" {
			t.Fatalf("kill: %v", k)
		}
		ok(t, s.do("DELETE", "/v1/shell/sessions/"+sid, nil))
		toolFailed(t, "view after delete", s.do("POST", "/v1/shell/view", map[string]any{"id": sid}))
	})

	t.Run("input-to-a-program-that-does-not-read", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"command": "sleep 600", "async_mode": true}))
		sid := d["session_id"].(string)
		// More than the terminal buffers: the request answers a conflict
		// (AIO's 200 with success:false) instead of hanging, and so does
		// the next while the first is pending.
		big := strings.Repeat("abcdefg\n", 8000)
		for i := 0; i < 2; i++ {
			toolFailed(t, fmt.Sprintf("write %d", i), s.do("POST", "/v1/shell/write", map[string]any{"id": sid, "input": big, "press_enter": false}))
		}
		ok(t, s.do("DELETE", "/v1/shell/sessions/"+sid, nil))
	})

	t.Run("exit-ends-the-session", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"command": "exit 3"}))
		if d["status"] != "terminated" {
			t.Fatalf("exit: %v", d)
		}
	})

	t.Run("one-off-execs-do-not-exhaust-the-session-cap", func(t *testing.T) {
		// Each exec without an id makes a session; past the cap the oldest
		// idle one gives way.
		for i := 0; i < 40; i++ {
			d := ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"command": "echo one-off"}))
			if d["output"] != "one-off\n" {
				t.Fatalf("exec %d: %v", i, d)
			}
			ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"command": "true"}))
		}
		st := ok(t, s.do("GET", "/v1/shell/sessions/stats", nil))
		if st["total_sessions"].(float64) > st["max_sessions"].(float64) {
			t.Fatalf("stats: %v", st)
		}
	})

	t.Run("truncation", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/shell/exec", map[string]any{"command": "head -c 100000 /dev/zero | tr '\\0' a; echo; echo END"}))
		out := d["output"].(string)
		if len([]rune(out)) > 30_100 || !strings.Contains(out, "truncated") || !strings.HasSuffix(out, "END\n") {
			t.Fatalf("truncated output: %d chars, tail %q", len(out), out[max(0, len(out)-40):])
		}
	})

	t.Run("bad-input", func(t *testing.T) {
		for _, c := range []struct {
			name, body string
			field      string
		}{
			{"negative-timeout", `{"command":"true","timeout":-1}`, "timeout"},
			{"overflowing-timeout", `{"command":"true","timeout":1e309}`, "timeout"},
			{"zero-hard-timeout", `{"command":"true","hard_timeout":0}`, "hard_timeout"},
			{"fractional-no-change", `{"command":"true","no_change_timeout":1.5}`, "no_change_timeout"},
			{"empty-command", `{"command":"  "}`, "command"},
			{"relative-dir", `{"command":"true","exec_dir":"tmp"}`, "exec_dir"},
			{"not-json", `{"command":`, ""},
			{"wrong-type", `{"command":42}`, "command"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := s.do("POST", "/v1/shell/exec", c.body)
				det, _ := r.body["detail"].([]any)
				if r.status != 422 || len(det) != 1 {
					t.Fatalf("got %d %s", r.status, r.raw)
				}
				loc := det[0].(map[string]any)["loc"].([]any)
				if loc[0] != "body" || (c.field != "" && loc[len(loc)-1] != c.field) {
					t.Fatalf("loc %v, want body.%s", loc, c.field)
				}
			})
		}
		for _, path := range []string{"/v1/shell/view", "/v1/shell/kill", "/v1/shell/write", "/v1/shell/wait"} {
			toolFailed(t, path+" unknown session", s.do("POST", path, map[string]any{"id": "no-such-session", "input": "x", "press_enter": false}))
		}
	})

	t.Run("other-keys-sessions-are-invisible", func(t *testing.T) {
		alice, bob := s.newKey("alice", "agent"), s.newKey("bob", "agent")
		d := ok(t, s.call(alice, "POST", "/v1/shell/exec", map[string]any{"command": "echo mine"}))
		sid := d["session_id"].(string)
		sb := ok(t, s.call(alice, "GET", "/v1/sandboxes", nil))
		_ = sb
		for _, path := range []string{"/v1/shell/view", "/v1/shell/kill", "/v1/shell/wait"} {
			toolFailed(t, "bob "+path, s.call(bob, "POST", path, map[string]any{"id": sid}))
		}
		toolFailed(t, "bob delete", s.call(bob, "DELETE", "/v1/shell/sessions/"+sid, nil))
		list := ok(t, s.call(bob, "GET", "/v1/shell/sessions", nil))
		if _, seen := list["sessions"].(map[string]any)[sid]; seen {
			t.Fatalf("bob lists alice's session: %v", list)
		}
		// Alice's session still works.
		ok(t, s.call(alice, "POST", "/v1/shell/view", map[string]any{"id": sid}))
	})
}
