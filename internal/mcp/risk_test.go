package mcp

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
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

func (m *memAudit) last() audit.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries[len(m.entries)-1]
}

// TestCommandToolsOverMCP: MCP lists a command-running tool with its
// per-call risk (never "safe"), and a call through MCP is audited with the
// guard's verdict (issue 11).
func TestCommandToolsOverMCP(t *testing.T) {
	au := &memAudit{}
	r := newRig(t, dispatch.Options{Audit: au}, Options{})
	g := guard.New(guard.Config{})
	type args struct {
		Command string `json:"command"`
	}
	r.d.MustRegister(dispatch.Tool{Name: "exec.run", Risk: guard.Safe,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`),
		Decode: func(raw json.RawMessage) (any, error) {
			var a args
			err := json.Unmarshal(raw, &a)
			return a, err
		},
		Assess: func(a any) dispatch.Assessment { return dispatch.FromVerdict(g.Classify(a.(args).Command)) },
		Run:    func(context.Context, auth.Caller, any) (any, error) { return map[string]any{"exit_code": 0}, nil }})
	r.d.MustRegister(dispatch.Tool{Name: "sandbox.list", Risk: guard.Safe,
		Run: func(context.Context, auth.Caller, any) (any, error) { return []string{}, nil }})
	cs := r.mustConnect("k-agent", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	risks := map[string][2]any{}
	for _, tl := range res.Tools {
		risks[tl.Name] = [2]any{tl.Meta["sandhold/risk"], tl.Meta["sandhold/risk_ceiling"]}
	}
	if got := risks["exec_run"]; got != [2]any{"dynamic", "dangerous"} {
		t.Errorf("exec_run listed %v, want dynamic up to dangerous", got)
	}
	if got := risks["sandbox_list"]; got != [2]any{"safe", nil} {
		t.Errorf("sandbox_list listed %v", got)
	}
	for cmd, label := range map[string]string{"ls": "safe", "xargs rm -rf <<< /": "flagged", `python3 -c 'exec(input())'`: "dynamic"} {
		if res := call(t, cs, "exec_run", map[string]any{"command": cmd}); res.IsError {
			t.Fatalf("%s: %s", cmd, text(res))
		}
		if e := au.last(); e.Action != "exec.run" || e.Detail["guard"] != label {
			t.Errorf("%s: record %s guard %v, want %q", cmd, e.Action, e.Detail["guard"], label)
		}
	}
}
