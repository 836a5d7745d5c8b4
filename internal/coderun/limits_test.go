package coderun_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/coderun"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/testenv"
)

// withKey returns a client of s that uses another key.
func (s *srv) withKey(key string) *srv { return &srv{t: s.t, base: s.base, key: key} }

func (s *srv) newKey(name, role string) string {
	s.t.Helper()
	st, out := s.do("POST", "/v1/keys", map[string]any{"name": name, "role": role})
	if st != 201 && st != 200 {
		s.t.Fatalf("create key: %d %v", st, out)
	}
	return out["data"].(map[string]any)["key"].(string)
}

func (s *srv) newSandbox(body map[string]any) string {
	s.t.Helper()
	st, out := s.do("POST", "/v1/sandboxes", body)
	if st != 201 {
		s.t.Fatalf("create sandbox: %d %v", st, out)
	}
	return out["data"].(map[string]any)["id"].(string)
}

func TestCodeLimitsAndIsolation(t *testing.T) {
	s := startServer(t)

	t.Run("cpu-time-per-execution", func(t *testing.T) {
		id := s.newSandbox(map[string]any{"limits": map[string]any{"cpu_time": "1s"}})
		st, out := s.do("POST", "/sandboxes/"+id+"/v1/code/execute", map[string]any{"language": "python", "code": "while True: pass", "timeout": 30, "stateful": true})
		d, _ := out["data"].(map[string]any)
		if st != 200 || d["reason"] != "cpu_time" || d["state_lost"] != true || d["status"] != "error" {
			t.Fatalf("%d %v", st, out)
		}
		if cpu, _ := d["cpu_ms"].(float64); cpu < 1000 {
			t.Fatalf("killed after %v ms of CPU, limit 1s", cpu)
		}
		// A child process burning CPU counts too (the execution cgroup).
		st, out = s.do("POST", "/sandboxes/"+id+"/v1/code/execute", map[string]any{"language": "bash", "code": "sh -c 'while :; do :; done'", "timeout": 30})
		if d, _ = out["data"].(map[string]any); st != 200 || d["status"] == "ok" {
			t.Fatalf("%d %v", st, out)
		}
	})

	t.Run("memory", func(t *testing.T) {
		id := s.newSandbox(map[string]any{"limits": map[string]any{"memory": "128MB"}})
		path := "/sandboxes/" + id + "/v1/code/execute"
		st, out := s.do("POST", path, map[string]any{"language": "python", "code": "keep = 1", "stateful": true})
		if st != 200 {
			t.Fatalf("%d %v", st, out)
		}
		sid := out["data"].(map[string]any)["session_id"].(string)
		st, out = s.do("POST", path, map[string]any{"language": "python", "code": "b = bytearray(512 << 20)", "stateful": true, "session_id": sid})
		d, _ := out["data"].(map[string]any)
		// Either python sees the allocation fail (MemoryError, state
		// kept) or the OOM killer ends the interpreter (state lost,
		// reason memory); never a hang or a 500.
		if st != 200 || d["status"] != "error" {
			t.Fatalf("%d %v", st, out)
		}
		if d["state_lost"] == true && d["reason"] != "memory" {
			t.Fatalf("lost state for reason %v, want memory: %v", d["reason"], d)
		}
		t.Logf("memory limit outcome: reason %v, state_lost %v", d["reason"], d["state_lost"])
	})

	t.Run("other-key-cannot-see-session", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "python", "code": "secret = 1", "stateful": true})
		sid := d["session_id"].(string)
		other := s.withKey(s.newKey("other-agent", "agent"))
		// Another key's session is unknown to this key: AIO's tool-level
		// failure, 200 with success:false.
		st, out := other.do("DELETE", "/v1/jupyter/sessions/"+sid, nil)
		requireToolFailure(t, "DELETE by another key", st, out, "no such session")
		// Naming the id starts a session of the other key's own (issue
		// 14): the first key's state is not in it.
		d = other.exec(map[string]any{"language": "python", "code": "secret", "stateful": true, "session_id": sid})
		if d["status"] != "error" || d["session_id"] != sid {
			t.Fatalf("another key reached the session's state: %v", d)
		}
		if st, out := other.do("DELETE", "/v1/jupyter/sessions/"+sid, nil); st != 200 || out["success"] != true {
			t.Fatalf("deleting its own session of that id: %d %v", st, out)
		}
		if d := s.exec(map[string]any{"language": "python", "code": "secret + 1", "stateful": true, "session_id": sid}); resultText(d) != "2" {
			t.Fatalf("the first key's session was disturbed: %v", d)
		}
		if d := other.exec(map[string]any{"language": "python", "code": "6 * 7"}); resultText(d) != "42" {
			t.Fatalf("plain python by an agent key: %v", d)
		}
		st, out = other.do("GET", "/v1/jupyter/sessions", nil)
		if sessions := out["data"].(map[string]any)["sessions"].(map[string]any); st != 200 || len(sessions) != 0 {
			t.Fatalf("another key lists sessions: %v", out)
		}
		// Code the guard flags waits for an operator (default policy for
		// agent keys); plain code ran above without one.
		st, out = other.do("POST", "/v1/code/execute", map[string]any{"language": "python", "code": "import os\nos.system('rm -rf /')"})
		if st != 202 || out["success"] != false {
			t.Fatalf("flagged python by an agent: %d %v", st, out)
		}
		// The owner still has it.
		d = s.exec(map[string]any{"language": "python", "code": "secret + 1", "stateful": true, "session_id": sid})
		if resultText(d) != "2" {
			t.Fatalf("%v", d)
		}
	})

	t.Run("viewer-creates-nothing", func(t *testing.T) {
		viewer := s.withKey(s.newKey("watcher", "viewer"))
		_, before := s.do("GET", "/v1/sandboxes", nil)
		for _, p := range []string{"/v1/code/info", "/v1/jupyter/info", "/v1/jupyter/sessions"} {
			if st, out := viewer.do("GET", p, nil); st != 200 {
				t.Errorf("viewer GET %s: %d %v", p, st, out)
			}
		}
		if st, out := viewer.do("POST", "/v1/code/execute", map[string]any{"language": "python", "code": "1"}); st != 403 {
			t.Errorf("viewer executes code: %d %v", st, out)
		}
		_, after := s.do("GET", "/v1/sandboxes", nil)
		if len(after["data"].([]any)) != len(before["data"].([]any)) {
			t.Fatalf("viewer calls created a sandbox: %d → %d", len(before["data"].([]any)), len(after["data"].([]any)))
		}
	})

	t.Run("stateful-latency", func(t *testing.T) {
		d := s.exec(map[string]any{"language": "python", "code": "n = 0", "stateful": true})
		sid := d["session_id"].(string)
		var took []time.Duration
		for range 20 {
			start := time.Now()
			s.exec(map[string]any{"language": "python", "code": "n += 1\nn", "stateful": true, "session_id": sid})
			took = append(took, time.Since(start))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		t.Logf("stateful python call through HTTP+dispatcher: median %s, p90 %s, max %s (20 calls)", took[10], took[18], took[19])
		for _, c := range []struct{ lang, code string }{{"python", "1"}, {"javascript", "1"}, {"bash", "true"}} {
			var stateless []time.Duration
			for range 5 {
				start := time.Now()
				s.exec(map[string]any{"language": c.lang, "code": c.code})
				stateless = append(stateless, time.Since(start))
			}
			sort.Slice(stateless, func(i, j int) bool { return stateless[i] < stateless[j] })
			t.Logf("stateless %s call (fresh interpreter): median %s (5 calls)", c.lang, stateless[2])
		}
	})
}

// TestSessionsServiceLevel drives the service directly (same server, real
// sandboxes) for what HTTP cannot reach cheaply: the per-key cap with
// eviction and idle expiry.
func TestSessionsServiceLevel(t *testing.T) {
	testenv.RequireSandboxes(t, "/usr/bin/python3")
	d := daemontest.Start(t, nil)
	ctx := context.Background()

	svc := coderun.New(coderun.Config{MaxSessions: 2, IdleTimeout: time.Minute}, d.Sandboxes())
	defer svc.Close()
	a := auth.Caller{KeyID: "key-a", Role: auth.RoleAgent}
	b := auth.Caller{KeyID: "key-b", Role: auth.RoleAgent}

	// Outside a dispatched call nothing creates a default sandbox
	// (sandbox.create_default is a tool), so each key names its own.
	box := map[string]string{}
	for _, c := range []auth.Caller{a, b} {
		info, err := d.Sandboxes().Create(ctx, sandbox.Caller{KeyID: c.KeyID}, sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		box[c.KeyID] = info.ID
	}
	run := func(c auth.Caller, id, code string) (coderun.Result, error) {
		return svc.Execute(ctx, c, box[c.KeyID], coderun.Request{Language: coderun.Bash, Code: code, Stateful: true, SessionID: id})
	}
	for _, name := range []string{"one", "two"} {
		info, err := svc.CreateSession(ctx, a, box[a.KeyID], coderun.Bash, name, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run(a, info.ID, "V="+name); err != nil {
			t.Fatal(err)
		}
	}
	// Key b's sessions do not count against key a's cap.
	if _, err := svc.CreateSession(ctx, b, box[b.KeyID], coderun.Bash, "b-one", ""); err != nil {
		t.Fatal(err)
	}
	// Use "one" so "two" is the least recently used, then create a third.
	if _, err := run(a, "one", "true"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateSession(ctx, a, box[a.KeyID], coderun.Bash, "three", ""); err != nil {
		t.Fatal(err)
	}
	res, err := run(a, "one", "echo $V")
	if err != nil || res.Stdout != "one\n" {
		t.Fatalf("kept session: %v %+v", err, res)
	}
	// The evicted session's state is gone: its id now starts a new one
	// (issue 14), which takes "three"'s place at the cap.
	if res, err := run(a, "two", "echo $V"); err != nil || res.Stdout != "\n" {
		t.Fatalf("evicted session: %v %+v, want a new session without V", err, res)
	}
	// Idle expiry: nothing expires early; everything after the timeout.
	svc.ReapIdle(time.Now())
	list, _ := svc.Sessions(ctx, a, box[a.KeyID], "")
	if len(list) != 2 {
		t.Fatalf("sessions before expiry: %d", len(list))
	}
	svc.ReapIdle(time.Now().Add(2 * time.Minute))
	for _, c := range []auth.Caller{a, b} {
		if list, _ := svc.Sessions(ctx, c, box[c.KeyID], ""); len(list) != 0 {
			out, _ := json.Marshal(list)
			t.Fatalf("sessions after expiry: %s", out)
		}
	}
	if res, err := run(a, "one", "echo $V"); err != nil || res.Stdout != "\n" {
		t.Fatalf("expired session: %v %+v, want a new session without V", err, res)
	}
}
