package daemon

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/testenv"
)

// refused checks that an answer is a refusal (AIO rows answer tool-level
// failures with 200 and success:false; native ones with a 4xx).
func refused(t *testing.T, what string, r resp) {
	t.Helper()
	if r.status < 400 && (r.env.Success == nil || *r.env.Success) {
		t.Fatalf("%s ran: %d %s", what, r.status, r.raw)
	}
}

// sandboxesOf counts the sandboxes a key owns.
func (s *server) sandboxesOf(keyID string) int {
	s.t.Helper()
	n := 0
	for _, in := range s.d.Sandboxes().List(sandbox.Caller{Admin: true}) {
		if in.Owner == keyID {
			n++
		}
	}
	return n
}

// records lists the audit records of action for actor.
func (s *server) records(actor, action string) []audit.Record {
	s.t.Helper()
	recs, err := s.d.Audit().Query(context.Background(), audit.Filter{Actor: actor, Action: action})
	if err != nil {
		s.t.Fatal(err)
	}
	return recs
}

// TestImplicitSandboxesPassTheChokepoint is row 2 of issue 29: while
// halted, convert, observe and hooks by a key without a default sandbox
// each made and started one; a key whose policy denies sandbox.* and
// exec.run got a default sandbox through code and bash execution.
func TestImplicitSandboxesPassTheChokepoint(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), nil)
	admin := s.d.AdminKey()
	t.Run("halted", func(t *testing.T) {
		ag := s.createKey("halted-agent", "agent")
		expectOK(t, s.do("POST", "/v1/control/halt", admin, map[string]any{"reason": "row 2"}, nil), 200, nil)
		defer func() { expectOK(t, s.do("POST", "/v1/control/unhalt", admin, nil, nil), 200, nil) }()
		for _, c := range []struct{ method, path string }{
			{"POST", "/v1/util/convert_to_markdown"},
			{"GET", "/v1/sandbox/observe/live"},
			{"GET", "/v1/sandbox/hooks"},
		} {
			refused(t, c.path, s.do(c.method, c.path, ag.Key, map[string]any{"uri": "file:///workspace/x.html"}, nil))
		}
		if n := s.sandboxesOf(ag.ID); n != 0 {
			t.Fatalf("%d sandboxes made while halted", n)
		}
	})
	t.Run("policy denies sandbox.* and exec.run", func(t *testing.T) {
		ag := s.createKey("denied-agent", "agent")
		var pol map[string]any
		expectOK(t, s.do("GET", "/v1/policy", admin, nil, nil), 200, &pol)
		pol["keys"] = map[string]any{ag.ID: map[string]any{"tools": map[string]string{"sandbox.*": "deny", "exec.run": "deny"}}}
		expectOK(t, s.do("PUT", "/v1/policy", admin, pol, nil), 200, nil)
		refused(t, "code", s.do("POST", "/v1/code/execute", ag.Key, map[string]any{"language": "bash", "code": "id"}, nil))
		refused(t, "bash", s.do("POST", "/v1/bash/exec", ag.Key, map[string]any{"command": "id"}, nil))
		// A call that runs no command still needs the default sandbox.
		refused(t, "file list", s.do("POST", "/v1/file/list", ag.Key, map[string]any{"path": "/workspace"}, nil))
		if n := s.sandboxesOf(ag.ID); n != 0 {
			t.Fatalf("%d sandboxes made against the policy", n)
		}
		if recs := s.records(ag.ID, sandbox.ToolCreateDefault.Name()); len(recs) == 0 || recs[0].Verdict != "denied" {
			t.Fatalf("the refused creation is not audited: %+v", recs)
		}
		for _, tool := range []string{"code.execute", "bash.exec"} {
			if !s.deniedFor(ag.ID, tool, "tool exec.run is denied") {
				t.Errorf("%s is not refused by exec.run's entry: %+v", tool, s.records(ag.ID, tool))
			}
		}
	})
	t.Run("allowed: one audited creation", func(t *testing.T) {
		ag := s.createKey("plain-agent", "agent")
		expectOK(t, s.do("POST", "/v1/bash/exec", ag.Key, map[string]any{"command": "true"}, nil), 200, nil)
		expectOK(t, s.do("POST", "/v1/bash/exec", ag.Key, map[string]any{"command": "true"}, nil), 200, nil)
		recs := s.records(ag.ID, sandbox.ToolCreateDefault.Name())
		if n := s.sandboxesOf(ag.ID); n != 1 || len(recs) != 1 || recs[0].Verdict != "allowed" {
			t.Fatalf("%d sandboxes, records %+v: want one, made by one allowed sandbox.create_default", n, recs)
		}
	})
}

// TestAServerStartedHaltedStartsNoStoppedSandbox: after a restart the
// sandboxes are stopped; a halted server refuses a call on one and does not
// start it (before, convert_to_markdown restarted it).
func TestAServerStartedHaltedStartsNoStoppedSandbox(t *testing.T) {
	testenv.RequireSandboxes(t)
	dir := t.TempDir()
	s := start(t, dir, nil)
	admin := s.d.AdminKey()
	ag := s.createKey("agent", "agent")
	var sb struct{ ID string }
	expectOK(t, s.do("POST", "/v1/sandboxes", ag.Key, map[string]any{}, nil), 201, &sb)
	expectOK(t, s.do("POST", "/v1/control/halt", admin, map[string]any{"reason": "restart"}, nil), 200, nil)
	s.stop()

	s2 := start(t, dir, nil)
	refused(t, "convert", s2.do("POST", "/sandboxes/"+sb.ID+"/v1/util/convert_to_markdown", ag.Key, map[string]any{"uri": "file:///workspace/x.html"}, nil))
	refused(t, "exec", s2.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", ag.Key, map[string]any{"command": "true"}, nil))
	got, err := s2.d.Sandboxes().Get(sandbox.Caller{Admin: true}, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st := got.State(); st != sandbox.Stopped {
		t.Fatalf("sandbox %s while halted, want stopped", st)
	}
	expectOK(t, s2.do("POST", "/v1/control/unhalt", admin, nil, nil), 200, nil)
	expectOK(t, s2.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", ag.Key, map[string]any{"command": "true"}, nil), 200, nil)
	if recs := s2.records(ag.ID, sandbox.ToolStart.Name()); len(recs) == 0 || recs[len(recs)-1].Verdict != "allowed" {
		t.Fatalf("the restart is not audited as sandbox.start: %+v", recs)
	}
}
