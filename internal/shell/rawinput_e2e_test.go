package shell_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/testenv"
)

// inputRecords are the shell.input records of the audit log.
func (s *srv) inputRecords(t *testing.T) []map[string]any {
	t.Helper()
	r := s.do("GET", "/v1/audit?action=shell.input", nil)
	if r.status != 200 {
		t.Fatalf("audit: %d %s", r.status, r.raw)
	}
	var out []map[string]any
	if recs, ok := r.data()["records"].([]any); ok {
		for _, x := range recs {
			out = append(out, x.(map[string]any))
		}
	}
	return out
}

// recorded reports whether a shell.input record with verdict holds line,
// written via via.
func (s *srv) recorded(t *testing.T, via, verdict, line string) bool {
	t.Helper()
	for _, r := range s.inputRecords(t) {
		d, _ := r["detail"].(map[string]any)
		lines, _ := json.Marshal(d["lines"])
		if r["verdict"] == verdict && d["via"] == via && strings.Contains(string(lines), line) {
			return true
		}
	}
	return false
}

// approve approves the pending approval id as the admin.
func (s *srv) approve(t *testing.T, id string) {
	t.Helper()
	if r := s.do("POST", "/v1/approvals/"+id+"/approve", map[string]any{}); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}
}

// approvalOf is the approval id of a 202 answer.
func approvalOf(t *testing.T, what string, r resp) string {
	t.Helper()
	id, _ := r.data()["approval_id"].(string)
	if r.status != 202 || id == "" {
		t.Fatalf("%s: %d %s, want 202 approval_required", what, r.status, r.raw)
	}
	return id
}

// TestRawInputIsAdmitted is row 4 of issue 29: a line that exec.run holds
// for approval (`… | sh`, flagged by the guard) ran when written to a sh
// started by bash/exec (bash.write) or typed into the terminal, and the
// audit held only bash.write {"bytes":61} / shell.terminal. Now each line
// waits like exec.run's command, and every line is recorded.
func TestRawInputIsAdmitted(t *testing.T) {
	s := startServer(t, nil)
	agent := s.newKey("typist", "agent")
	const line = "echo echo ran-$((40+2)) | sh"

	t.Run("bash.write", func(t *testing.T) {
		d := ok(t, s.call(agent, "POST", "/v1/bash/exec", map[string]any{"command": "sh", "async_mode": true}))
		sid, cid := d["session_id"].(string), d["command_id"].(string)
		w := map[string]any{"session_id": sid, "command_id": cid, "input": line + "\n"}
		id := approvalOf(t, "bash.write of a flagged line", s.call(agent, "POST", "/v1/bash/write", w))
		if out := s.call(agent, "POST", "/v1/bash/output", map[string]any{"session_id": sid, "command_id": cid}); strings.Contains(string(out.raw), "ran-42") {
			t.Fatalf("the line ran before its approval: %s", out.raw)
		}
		if !s.recorded(t, "bash.write", "pending", line) {
			t.Fatalf("no pending shell.input record of the line: %+v", s.inputRecords(t))
		}
		s.approve(t, id)
		ok(t, s.call(agent, "POST", "/v1/bash/write", w))
		testenv.Eventually(t, "the approved line ran", func() bool {
			out := s.call(agent, "POST", "/v1/bash/output", map[string]any{"session_id": sid, "command_id": cid})
			return strings.Contains(string(out.raw), "ran-42")
		})
		// An ordinary line runs at once, and is recorded.
		ok(t, s.call(agent, "POST", "/v1/bash/write", map[string]any{"session_id": sid, "command_id": cid, "input": "echo plain-line\n"}))
		if !s.recorded(t, "bash.write", "allowed", "echo plain-line") {
			t.Fatal("an allowed line is not recorded")
		}
	})

	t.Run("shell.write split over writes", func(t *testing.T) {
		d := ok(t, s.call(agent, "POST", "/v1/shell/sessions/create", map[string]any{}))
		sid := d["session_id"].(string)
		// The first half runs nothing and waits; the second completes it.
		ok(t, s.call(agent, "POST", "/v1/shell/write", map[string]any{"id": sid, "input": "echo echo ran-$((40+2)) "}))
		approvalOf(t, "shell.write completing a flagged line", s.call(agent, "POST", "/v1/shell/write", map[string]any{"id": sid, "input": "| sh", "press_enter": true}))
		if !s.recorded(t, "shell.write", "pending", line) {
			t.Fatalf("the assembled line is not what was assessed: %+v", s.inputRecords(t))
		}
		// A command through shell.exec would run after the waiting text.
		r := s.call(agent, "POST", "/v1/shell/exec", map[string]any{"id": sid, "command": "true"})
		if r.status == 200 && r.body["success"] == true {
			t.Fatalf("shell.exec ran behind a partial line: %s", r.raw)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		tm, _, err := s.dialTerm(t, agent, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range line { // typed key by key
			tm.send("input", string(ch))
		}
		tm.send("input", "\r")
		for {
			m := tm.read()
			if m.Type == "error" {
				var msg string
				_ = json.Unmarshal(m.Data, &msg)
				if !strings.Contains(msg, "approval") {
					t.Fatalf("error %q, want the approval", msg)
				}
				break
			}
			if m.Type == "output" {
				var o string
				_ = json.Unmarshal(m.Data, &o)
				if strings.Contains(o, "ran-42") {
					t.Fatalf("the typed line ran: %q", o)
				}
			}
		}
		if !s.recorded(t, "terminal", "pending", line) {
			t.Fatalf("the typed line is not recorded: %+v", s.inputRecords(t))
		}
		// Cleared with Ctrl-U; what is typed next runs and is recorded.
		tm.seen.Reset()
		tm.send("input", "\x15")
		tm.send("input", "echo typed-$((1+1))\r")
		tm.expect("typed-2")
		// The record follows the write (it holds the outcome).
		testenv.Eventually(t, "the typed line recorded", func() bool { return s.recorded(t, "terminal", "allowed", "echo typed-$((1+1))") })
	})
}
