package customtool

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/dispatch"
)

type memAudit struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (m *memAudit) Append(_ context.Context, e audit.Entry) (audit.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = append(m.entries, e)
	return audit.Record{}, nil
}

// byAction is the last record of action.
func (m *memAudit) byAction(action string) (audit.Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.entries) - 1; i >= 0; i-- {
		if m.entries[i].Action == action {
			return m.entries[i], true
		}
	}
	return audit.Entry{}, false
}

// TestCustomToolRecordsCarryTheGuardVerdict: a command run through a custom
// tool is recorded with the guard's verdict twice — on the custom tool's
// record (derived from its steps) and on the exec step's own (issue 11).
func TestCustomToolRecordsCarryTheGuardVerdict(t *testing.T) {
	rec := &recorder{seen: map[string]dispatch.Assessment{}}
	au := &memAudit{}
	f := &fixture{d: dispatch.New(dispatch.Options{Policy: rec, Halt: rec, Audit: au}), rec: rec, st: &memSettings{}}
	builtins(f)
	r, problems, err := Load(ctx, f.d, f.st)
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	for _, tl := range Tools(r) {
		f.d.MustRegister(tl)
	}
	f.r = r
	f.mustDefine(t, agent, `{"name":"run_cmd","inputSchema":`+cmdSchema+`,"call":{"tool":"exec.run","arguments":{"command":"{cmd}"}}}`)
	f.mustDefine(t, agent, `{"name":"two_steps","steps":[{"id":"a","tool":"exec.run","arguments":{"command":"ls"}},`+
		`{"id":"b","tool":"exec.run","arguments":{"command":"{steps.a.stdout}"}}]}`)
	cases := []struct {
		tool, args, label string
	}{
		{"run_cmd", `{"cmd":"ls"}`, "safe"},
		{"run_cmd", `{"cmd":"perl -e \"system(q{rm -rf /})\""}`, "flagged"},
		{"run_cmd", `{"cmd":"python3 -c \"import os;os.system(bytes.fromhex('726d').decode())\""}`, "dynamic"},
		{"two_steps", `{}`, "dynamic"}, // step b's command comes from step a's output
	}
	for _, tc := range cases {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			if _, err := f.d.Call(ctx, agent, tc.tool, json.RawMessage(tc.args)); err != nil {
				t.Fatal(err)
			}
			e, ok := au.byAction(tc.tool)
			if !ok || e.Detail["guard"] != tc.label {
				t.Fatalf("%s record: guard %v, want %q (%v)", tc.tool, e.Detail["guard"], tc.label, e.Detail)
			}
			step, ok := au.byAction("exec.run")
			if !ok || step.Detail["guard"] == nil || step.Detail["depth"] != 1 {
				t.Fatalf("exec.run step record has no guard verdict: %v", step.Detail)
			}
		})
	}
}

// TestListingShowsPerCallRisk: GET /v1/tools never lists a command-running
// built-in as safe (issue 11).
func TestListingShowsPerCallRisk(t *testing.T) {
	f := newFixture(t, &memSettings{})
	f.mustDefine(t, agent, `{"name":"run_cmd","risk":"safe","inputSchema":`+cmdSchema+`,"call":{"tool":"exec.run","arguments":{"command":"{cmd}"}}}`)
	got := map[string]Info{}
	for _, in := range f.r.List(agent) {
		got[in.Name] = in
	}
	want := map[string][3]string{
		"exec.run":  {"dynamic", "safe", "dangerous"},
		"file.read": {"safe", "", ""},
		"run_cmd":   {"dangerous", "", ""},
	}
	for name, w := range want {
		in, ok := got[name]
		if !ok || [3]string{in.Risk, in.RiskFloor, in.RiskCeiling} != w {
			t.Errorf("%s listed %q floor %q ceiling %q, want %v", name, in.Risk, in.RiskFloor, in.RiskCeiling, w)
		}
	}
}
