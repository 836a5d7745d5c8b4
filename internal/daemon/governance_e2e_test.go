package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/testenv"
)

type approvalData struct {
	Code       string `json:"code"`
	ApprovalID string `json:"approval_id"`
	Status     string `json:"status"`
}

type govExec struct {
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	ExitCode *int   `json:"exit_code"`
	Stdout   string `json:"stdout"`
}

// pending checks a 202 answer and returns its approval id.
func pending(t *testing.T, r resp) string {
	t.Helper()
	if r.status != 202 {
		t.Fatalf("status %d, want 202: %s", r.status, r.raw)
	}
	var d approvalData
	if err := json.Unmarshal(r.env.Data, &d); err != nil || d.ApprovalID == "" || d.Status != "pending" || d.Code != "approval_required" {
		t.Fatalf("202 data %s", r.env.Data)
	}
	if r.header.Get("Location") != "/v1/approvals/"+d.ApprovalID {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	return d.ApprovalID
}

// deniedFor reports whether the audit log holds a denied record of action
// for actor with reason.
func (s *server) deniedFor(actor, action, reason string) bool {
	s.t.Helper()
	recs, err := s.d.Audit().Query(context.Background(), audit.Filter{Actor: actor, Action: action})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, r := range recs {
		if r.Verdict == "denied" && r.Detail["reason"] == reason {
			return true
		}
	}
	return false
}

func TestGovernanceE2E(t *testing.T) {
	testenv.RequireSandboxes(t)
	s := start(t, t.TempDir(), nil)
	admin := s.d.AdminKey()
	ag := s.createKey("agent", "agent")
	// This test runs more commands than the default 10 a minute: the
	// policy raises this key's exec limit (and proves key rate rules
	// reach the limiter).
	expectOK(t, s.do("PUT", "/v1/policy", admin, map[string]any{
		"roles": map[string]any{"agent": map[string]any{"allow_up_to": "dangerous", "approve_up_to": "dangerous", "flagged": "approve"}},
		"keys":  map[string]any{ag.ID: map[string]any{"rate_limits": map[string]any{"exec": map[string]any{"per_minute": 600, "burst": 100}}}},
	}, nil), 200, nil)
	var sb struct{ ID string }
	expectOK(t, s.do("POST", "/v1/sandboxes", ag.Key, map[string]any{"name": "gov"}, nil), 201, &sb)
	execPath := "/v1/sandboxes/" + sb.ID + "/exec"

	t.Run("agent on policy, halt, unhalt and approvals is 403, audited", func(t *testing.T) {
		for _, c := range []struct{ method, path, action string }{
			{"GET", "/v1/policy", "policy.get"},
			{"PUT", "/v1/policy", "policy.set"},
			{"POST", "/v1/control/halt", "control.halt"},
			{"POST", "/v1/control/unhalt", "control.unhalt"},
			{"GET", "/v1/approvals", "approvals.list"},
			{"POST", "/v1/approvals/apr_x/approve", "approvals.approve"},
			{"POST", "/v1/approvals/apr_x/deny", "approvals.deny"},
		} {
			var body any
			if c.method != "GET" {
				body = map[string]any{}
			}
			if c.path == "/v1/policy" && c.method == "PUT" {
				body = map[string]any{"roles": map[string]any{"agent": map[string]any{"allow_up_to": "dangerous", "flagged": "allow"}}}
			}
			expectError(t, s.do(c.method, c.path, ag.Key, body, nil), 403, "forbidden")
			if !s.deniedFor(ag.ID, c.action, "role") {
				t.Fatalf("%s %s: no denied %s audit record", c.method, c.path, c.action)
			}
		}
		var st struct{ Halted bool }
		expectOK(t, s.do("GET", "/v1/control", ag.Key, nil, nil), 200, &st)
		if st.Halted {
			t.Fatal("halted")
		}
	})

	t.Run("ordinary agent commands run without approval", func(t *testing.T) {
		for _, cmd := range []string{"ls -la /workspace", "echo hello", "python3 -c 'print(6*7)' || true"} {
			var res govExec
			expectOK(t, s.do("POST", execPath, ag.Key, map[string]any{"command": cmd}, nil), 200, &res)
		}
	})

	flagged := "cat ~/.ssh/id_rsa 2>/dev/null || echo approved-ran"
	t.Run("approval end to end: 202, admin approves, the identical call runs once", func(t *testing.T) {
		id := pending(t, s.do("POST", execPath, ag.Key, map[string]any{"command": flagged}, nil))
		var ap struct {
			ID, Status, Tool, Target, Actor string
			Rules                           []string
		}
		expectOK(t, s.do("GET", "/v1/approvals/"+id, ag.Key, nil, nil), 200, &ap)
		if ap.Status != "pending" || ap.Tool != "exec.run" || ap.Target != flagged || ap.Actor != ag.ID || len(ap.Rules) == 0 {
			t.Fatalf("approval %+v", ap)
		}
		var list []struct{ ID string }
		expectOK(t, s.do("GET", "/v1/approvals?status=pending", admin, nil, nil), 200, &list)
		if len(list) != 1 || list[0].ID != id {
			t.Fatalf("pending list %+v", list)
		}
		expectOK(t, s.do("POST", "/v1/approvals/"+id+"/approve", admin, map[string]any{"note": "once"}, nil), 200, &ap)
		if ap.Status != "approved" {
			t.Fatalf("after approve: %+v", ap)
		}
		var res govExec
		expectOK(t, s.do("POST", execPath, ag.Key, map[string]any{"command": flagged}, nil), 200, &res)
		if !strings.Contains(res.Stdout, "approved-ran") {
			t.Fatalf("approved call: %+v", res)
		}
		// Single use: the same call again waits for a new approval.
		id2 := pending(t, s.do("POST", execPath, ag.Key, map[string]any{"command": flagged}, nil))
		if id2 == id {
			t.Fatal("approval reused")
		}
		expectOK(t, s.do("POST", "/v1/approvals/"+id2+"/deny", admin, map[string]any{"note": "no"}, nil), 200, &ap)
		expectOK(t, s.do("GET", "/v1/approvals/"+id2, ag.Key, nil, nil), 200, &ap)
		if ap.Status != "denied" {
			t.Fatalf("after deny: %+v", ap)
		}
		// Decisions are audited.
		if got := s.auditActions(audit.Filter{Action: "approvals.approve", Actor: admin2ID(t, s)}); len(got) != 1 {
			t.Fatalf("approve audit records: %v", got)
		}
	})

	t.Run("a waiting caller runs as soon as the operator approves", func(t *testing.T) {
		cmd := flagged + " waited"
		done := make(chan resp, 1)
		go func() {
			done <- s.do("POST", execPath, ag.Key, map[string]any{"command": cmd}, map[string]string{"X-Approval-Wait": "30"})
		}()
		var id string
		for i := 0; id == "" && i < 500; i++ {
			var list []struct{ ID, Target string }
			expectOK(t, s.do("GET", "/v1/approvals?status=pending", admin, nil, nil), 200, &list)
			for _, a := range list {
				if a.Target == cmd {
					id = a.ID
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if id == "" {
			t.Fatal("the waiting call made no approval")
		}
		expectOK(t, s.do("POST", "/v1/approvals/"+id+"/approve", admin, nil, nil), 200, nil)
		var res govExec
		expectOK(t, <-done, 200, &res)
		if !strings.Contains(res.Stdout, "approved-ran waited") {
			t.Fatalf("waited call: %+v", res)
		}
	})

	t.Run("custom tools over HTTP", func(t *testing.T) {
		def := map[string]any{"name": "run_cmd", "risk": "safe",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}},
			"call":        map[string]any{"tool": "exec.run", "arguments": map[string]any{"id": sb.ID, "command": "{cmd}"}}}
		expectOK(t, s.do("POST", "/v1/tools/custom", ag.Key, def, nil), 201, nil)
		var tools []struct{ Name, Risk string }
		expectOK(t, s.do("GET", "/v1/tools", ag.Key, nil, nil), 200, &tools)
		found := false
		for _, tl := range tools {
			if tl.Name == "run_cmd" {
				found = tl.Risk == "dangerous"
			}
			if strings.HasPrefix(tl.Name, "policy.") || strings.HasPrefix(tl.Name, "keys.") {
				t.Fatalf("agent lists admin tool %s", tl.Name)
			}
		}
		if !found {
			t.Fatalf("run_cmd not listed as dangerous: %+v", tools)
		}
		var res govExec
		expectOK(t, s.do("POST", "/v1/tools/call", ag.Key, map[string]any{"name": "run_cmd", "arguments": map[string]any{"cmd": "echo via-custom"}}, nil), 200, &res)
		if !strings.Contains(res.Stdout, "via-custom") {
			t.Fatalf("custom call: %+v", res)
		}
		// A flagged command through the wrapper still needs approval, and
		// one approval of the wrapper call covers the exec it makes.
		wrapped := map[string]any{"name": "run_cmd", "arguments": map[string]any{"cmd": flagged}}
		id := pending(t, s.do("POST", "/v1/tools/call", ag.Key, wrapped, nil))
		expectOK(t, s.do("POST", "/v1/approvals/"+id+"/approve", admin, nil, nil), 200, nil)
		expectOK(t, s.do("POST", "/v1/tools/call", ag.Key, wrapped, nil), 200, &res)
		if !strings.Contains(res.Stdout, "approved-ran") {
			t.Fatalf("approved wrapper call: %+v", res)
		}
		d := expectError(t, s.do("POST", "/v1/tools/call", ag.Key, map[string]any{"name": "run_cmd", "arguments": map[string]any{"cmd": 5}}, nil), 422, "unprocessable")
		if d.Field != "arguments.cmd" {
			t.Fatalf("field %q", d.Field)
		}
		d = expectError(t, s.do("POST", "/v1/tools/custom", ag.Key, map[string]any{"name": "exec.run", "call": map[string]any{"tool": "sandbox.list"}}, nil), 400, "invalid")
		if d.Field != "name" {
			t.Fatalf("collision field %q", d.Field)
		}
		expectError(t, s.do("POST", "/v1/tools/custom", ag.Key, map[string]any{"name": "sneaky", "call": map[string]any{"tool": "policy.set"}}, nil), 400, "invalid")
		other := s.createKey("other", "agent")
		expectError(t, s.do("POST", "/v1/tools/call", other.Key, map[string]any{"name": "run_cmd", "arguments": map[string]any{"cmd": "ls"}}, nil), 404, "not_found")
		expectOK(t, s.do("DELETE", "/v1/tools/custom/run_cmd", ag.Key, nil, nil), 200, nil)
	})

	t.Run("HALT kills a running command, freezes, refuses, and unhalt thaws", func(t *testing.T) {
		done := make(chan resp, 1)
		go func() {
			done <- s.do("POST", execPath, ag.Key, map[string]any{"command": "sleep 30; echo finished", "timeout": 120}, nil)
		}()
		// Wait until the command runs.
		for i := 0; ; i++ {
			if n := s.runningExecs(sb.ID); n > 0 {
				break
			}
			if i > 500 {
				t.Fatal("the command never started")
			}
			time.Sleep(10 * time.Millisecond)
		}
		var st struct {
			Halted bool
			Reason string
			Frozen []string
		}
		expectOK(t, s.do("POST", "/v1/control/halt", admin, map[string]any{"reason": "incident 7"}, nil), 200, &st)
		if !st.Halted || st.Reason != "incident 7" || len(st.Frozen) == 0 {
			t.Fatalf("halt: %+v", st)
		}
		var res govExec
		expectOK(t, <-done, 200, &res)
		if res.Status != "killed" || strings.Contains(res.Stdout, "finished") {
			t.Fatalf("running command under HALT: %+v", res)
		}
		var info struct{ State string }
		expectOK(t, s.do("GET", "/v1/sandboxes/"+sb.ID, ag.Key, nil, nil), 200, &info)
		if info.State != "paused" {
			t.Fatalf("sandbox state %q under HALT", info.State)
		}
		expectError(t, s.do("POST", execPath, ag.Key, map[string]any{"command": "ls"}, nil), 409, "conflict")
		expectError(t, s.do("POST", execPath, admin, map[string]any{"command": "ls"}, nil), 409, "conflict")
		if !s.deniedFor(ag.ID, "exec.run", "halted") {
			t.Fatal("refusal under HALT not audited")
		}
		expectOK(t, s.do("GET", "/v1/control", ag.Key, nil, nil), 200, &st)
		if !st.Halted {
			t.Fatal("agent reads not halted")
		}
		// Safe tools still run.
		expectOK(t, s.do("GET", "/v1/sandboxes", ag.Key, nil, nil), 200, nil)
		expectOK(t, s.do("POST", "/v1/control/unhalt", admin, nil, nil), 200, &st)
		expectOK(t, s.do("GET", "/v1/sandboxes/"+sb.ID, ag.Key, nil, nil), 200, &info)
		if st.Halted || info.State != "running" {
			t.Fatalf("after unhalt: %+v, sandbox %q", st, info.State)
		}
		expectOK(t, s.do("POST", execPath, ag.Key, map[string]any{"command": "echo back"}, nil), 200, &res)
		if !strings.Contains(res.Stdout, "back") {
			t.Fatalf("after unhalt: %+v", res)
		}
	})
}

// admin2ID is the admin key's id (the bootstrap key).
func admin2ID(t *testing.T, s *server) string {
	t.Helper()
	ks, err := s.d.Store().ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if k.Role == "admin" {
			return k.ID
		}
	}
	t.Fatal("no admin key")
	return ""
}

// runningExecs counts a sandbox's running executions.
func (s *server) runningExecs(id string) int {
	for _, sb := range s.d.Sandboxes().All() {
		if sb.ID() == id {
			return sb.RunningExecs()
		}
	}
	return 0
}

func TestPolicyAndHaltSurviveARestart(t *testing.T) {
	testenv.RequireSandboxes(t)
	dir := t.TempDir()
	s := start(t, dir, nil)
	admin := s.d.AdminKey()
	ag := s.createKey("agent", "agent")
	pol := map[string]any{"roles": map[string]any{"agent": map[string]any{
		"allow_up_to": "dangerous", "flagged": "approve", "commands": map[string]any{"deny": []string{"nc", "ncat"}},
		"rate_limits": map[string]any{"exec": map[string]any{"per_minute": 600, "burst": 100}}}}}
	expectOK(t, s.do("PUT", "/v1/policy", admin, pol, nil), 200, nil)
	d := expectError(t, s.do("PUT", "/v1/policy", admin, map[string]any{"roles": map[string]any{"agent": map[string]any{"allow_up_to": "everything"}}}, nil), 422, "unprocessable")
	if d.Field != "body.roles.agent.allow_up_to" {
		t.Fatalf("field %q", d.Field)
	}
	d = expectError(t, s.do("PUT", "/v1/policy", admin, map[string]any{"roles": map[string]any{"agent": map[string]any{"commands": map[string]any{"deny": []string{"["}}}}}, nil), 400, "invalid")
	if d.Field != "roles.agent.commands.deny" {
		t.Fatalf("field %q", d.Field)
	}
	expectError(t, s.do("POST", "/v1/sandboxes/x/exec", ag.Key, map[string]any{"command": "echo hi | nc 127.0.0.1 9"}, nil), 403, "forbidden")
	expectOK(t, s.do("POST", "/v1/control/halt", admin, map[string]any{"reason": "maintenance"}, nil), 200, nil)
	s.stop()

	s2 := start(t, dir, nil)
	var got struct {
		Roles map[string]struct {
			Commands struct{ Deny []string }
		}
	}
	expectOK(t, s2.do("GET", "/v1/policy", admin, nil, nil), 200, &got)
	if deny := got.Roles["agent"].Commands.Deny; len(deny) != 2 || deny[0] != "nc" {
		t.Fatalf("policy after restart: %+v", got)
	}
	var st struct {
		Halted bool
		Reason string
	}
	expectOK(t, s2.do("GET", "/v1/control", ag.Key, nil, nil), 200, &st)
	if !st.Halted || st.Reason != "maintenance" {
		t.Fatalf("HALT after restart: %+v", st)
	}
	expectError(t, s2.do("POST", "/v1/sandboxes", ag.Key, map[string]any{}, nil), 409, "conflict")
	expectOK(t, s2.do("POST", "/v1/control/unhalt", admin, nil, nil), 200, nil)
	var sb struct{ ID string }
	expectOK(t, s2.do("POST", "/v1/sandboxes", ag.Key, map[string]any{}, nil), 201, &sb)
	expectError(t, s2.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", ag.Key, map[string]any{"command": "nc -h"}, nil), 403, "forbidden")
	var res govExec
	expectOK(t, s2.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", ag.Key, map[string]any{"command": "echo ok"}, nil), 200, &res)
}
