package shell_test

import (
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/testenv"
)

// TestBashPipe drives /v1/bash through the real server and real sandboxes.
func TestBashPipe(t *testing.T) {
	s := startServer(t, nil)

	t.Run("separate-streams-env-and-dir", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{
			"command": `printf out; printf err >&2; echo " $FOO $(pwd)"; cd /; export BAR=1`, "env": map[string]string{"FOO": "foo"}, "exec_dir": "/tmp"}))
		if d["status"] != "completed" || d["stdout"] != "out foo /tmp\n" || d["stderr"] != "err" || d["exit_code"] != float64(0) {
			t.Fatalf("exec: %v", d)
		}
		if d["offset"] != float64(len("out foo /tmp\n")) || d["stderr_offset"] != float64(3) || d["command_id"] == "" {
			t.Fatalf("offsets: %v", d)
		}
		sid := d["session_id"].(string)
		// The session keeps exec_dir; cd, export and env do not persist.
		d = ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"session_id": sid, "command": `echo "$(pwd) [$BAR] [$FOO]"; exit 7`}))
		if d["stdout"] != "/tmp [] []\n" || d["exit_code"] != float64(7) || d["status"] != "completed" {
			t.Fatalf("second exec: %v", d)
		}
		// The end of each command is audited, without its output.
		testenv.Eventually(t, "bash.finish audited", func() bool {
			a := s.do("GET", "/v1/audit?action=bash.finish", nil)
			return a.status == 200 && strings.Contains(string(a.raw), `"exit_code":7`) && !strings.Contains(string(a.raw), "out foo")
		})
		list := s.do("GET", "/v1/bash/sessions", nil)
		if list.status != 200 || !strings.Contains(string(list.raw), sid) {
			t.Fatalf("sessions: %s", list.raw)
		}
	})

	t.Run("background-with-offset-polling", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{
			"command": `for i in 1 2 3; do echo line$i; sleep 0.3; done; echo done >&2`, "async_mode": true}))
		sid, cid := d["session_id"].(string), d["command_id"].(string)
		if d["status"] != "running" {
			t.Fatalf("async: %v", d)
		}
		var stdout, stderr string
		var off, eoff float64
		for i := 0; i < 100; i++ {
			o := ok(t, s.do("POST", "/v1/bash/output", map[string]any{"session_id": sid, "command_id": cid, "offset": off,
				"stderr_offset": eoff, "wait": true, "wait_timeout": 5}))
			stdout += o["stdout"].(string)
			stderr += o["stderr"].(string)
			off, eoff = o["offset"].(float64), o["stderr_offset"].(float64)
			if o["command"].(map[string]any)["status"] == "completed" && o["stdout"] == "" && o["stderr"] == "" {
				break
			}
		}
		if stdout != "line1\nline2\nline3\n" || stderr != "done\n" || off != float64(len(stdout)) {
			t.Fatalf("polled %q %q at %v", stdout, stderr, off)
		}
	})

	t.Run("stdin-write", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"command": `read a; read b; echo "sum $((a+b))"`, "async_mode": true}))
		sid := d["session_id"].(string)
		ok(t, s.do("POST", "/v1/bash/write", map[string]any{"session_id": sid, "input": "40\n"}))
		ok(t, s.do("POST", "/v1/bash/write", map[string]any{"session_id": sid, "input": "2\n"}))
		o := ok(t, s.do("POST", "/v1/bash/output", map[string]any{"session_id": sid, "wait": true, "wait_timeout": 20}))
		for i := 0; i < 50 && o["stdout"] == ""; i++ {
			o = ok(t, s.do("POST", "/v1/bash/output", map[string]any{"session_id": sid, "wait": true, "wait_timeout": 20}))
		}
		if o["stdout"] != "sum 42\n" {
			t.Fatalf("stdin: %v", o)
		}
	})

	t.Run("kill-with-signal", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"command": `trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.1; done`, "async_mode": true}))
		sid := d["session_id"].(string)
		testenv.Eventually(t, "ready", func() bool {
			o := ok(t, s.do("POST", "/v1/bash/output", map[string]any{"session_id": sid}))
			return o["stdout"] == "ready\n"
		})
		k := ok(t, s.do("POST", "/v1/bash/kill", map[string]any{"session_id": sid, "signal": "SIGINT"}))
		if k["status"] != "killed" || k["exit_code"] != float64(5) {
			t.Fatalf("SIGINT: %v", k)
		}
		o := ok(t, s.do("POST", "/v1/bash/output", map[string]any{"session_id": sid}))
		if !strings.Contains(o["stdout"].(string), "got-int") {
			t.Fatalf("trap output: %v", o)
		}
		// SIGTERM ignored: still running; SIGKILL ends it.
		d = ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"session_id": sid, "command": `trap '' TERM; echo armed; while :; do sleep 0.1; done`, "async_mode": true}))
		testenv.Eventually(t, "trap armed", func() bool {
			o := ok(t, s.do("POST", "/v1/bash/output", map[string]any{"session_id": sid, "command_id": d["command_id"]}))
			return o["stdout"] == "armed\n"
		})
		k = ok(t, s.do("POST", "/v1/bash/kill", map[string]any{"session_id": sid, "signal": "SIGTERM"}))
		if k["status"] != "running" {
			t.Fatalf("ignored SIGTERM: %v", k)
		}
		k = ok(t, s.do("POST", "/v1/bash/kill", map[string]any{"session_id": sid, "signal": "SIGKILL"}))
		if k["status"] != "killed" {
			t.Fatalf("SIGKILL: %v", k)
		}
	})

	t.Run("hard-timeout", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"command": `trap '' TERM INT; sleep 100 & wait`, "hard_timeout": 1}))
		if d["status"] != "timed_out" {
			t.Fatalf("hard timeout: %v", d)
		}
	})

	t.Run("soft-timeout-keeps-running", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"command": `sleep 1.5; echo late`, "timeout": 0.2}))
		if d["status"] != "running" {
			t.Fatalf("soft timeout: %v", d)
		}
		o := ok(t, s.do("POST", "/v1/bash/output", map[string]any{"session_id": d["session_id"], "command_id": d["command_id"], "wait": true, "wait_timeout": 30}))
		if o["stdout"] != "late\n" {
			t.Fatalf("after soft timeout: %v", o)
		}
	})

	t.Run("middle-truncation", func(t *testing.T) {
		d := ok(t, s.do("POST", "/v1/bash/exec", map[string]any{"command": `echo HEAD; head -c 200000 /dev/zero | tr '\0' x; echo; echo TAIL`, "max_output_length": 1000}))
		out := d["stdout"].(string)
		if len(out) > 1100 || !strings.HasPrefix(out, "HEAD\n") || !strings.HasSuffix(out, "TAIL\n") || !strings.Contains(out, "truncated") {
			t.Fatalf("truncated stdout (%d): %q…", len(out), out[:min(80, len(out))])
		}
		if d["offset"] != float64(200011) {
			t.Fatalf("offset %v counts every byte", d["offset"])
		}
	})

	t.Run("bad-input", func(t *testing.T) {
		for _, c := range []struct{ name, path, body string }{
			{"huge-max-output", "/v1/bash/exec", `{"command":"true","max_output_length":1000000000000}`},
			{"negative-max-output", "/v1/bash/exec", `{"command":"true","max_output_length":-1}`},
			{"negative-timeout", "/v1/bash/exec", `{"command":"true","timeout":-1}`},
			{"overflow-hard-timeout", "/v1/bash/exec", `{"command":"true","hard_timeout":1e309}`},
			{"bad-env-name", "/v1/bash/exec", `{"command":"true","env":{"A-B":"x"}}`},
			{"bad-signal", "/v1/bash/kill", `{"session_id":"x","signal":"SIGSTOP"}`},
			{"negative-offset", "/v1/bash/output", `{"session_id":"x","offset":-5}`},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := s.do("POST", c.path, c.body)
				if _, has := r.body["detail"]; r.status != 422 || !has {
					t.Fatalf("got %d %s", r.status, r.raw)
				}
			})
		}
		for _, path := range []string{"/v1/bash/output", "/v1/bash/write", "/v1/bash/kill"} {
			toolFailed(t, path+" unknown session", s.do("POST", path, map[string]any{"session_id": "nope", "input": "x"}))
		}
		r := s.do("POST", "/v1/bash/exec", map[string]any{"session_id": "a/b", "command": "true"})
		if r.status != 422 {
			t.Fatalf("exec with a malformed session id: %d %s", r.status, r.raw)
		}
	})

	t.Run("other-keys-sessions-are-invisible", func(t *testing.T) {
		alice, bob := s.newKey("alice", "agent"), s.newKey("bob", "agent")
		d := ok(t, s.call(alice, "POST", "/v1/bash/exec", map[string]any{"command": "echo mine"}))
		sid := d["session_id"].(string)
		toolFailed(t, "bob reads alice's output", s.call(bob, "POST", "/v1/bash/output", map[string]any{"session_id": sid}))
		// Even naming alice's sandbox does not help: it is invisible too.
		sbs := ok(t, s.call(alice, "GET", "/v1/sandboxes", nil))
		_ = sbs
	})
}
