package dispatch

import (
	"context"
	"slices"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/guard"
)

// commandTool is an exec-like tool: declared safe, its command decides.
func commandTool(g *guard.Guard, name string, ran *int) Tool {
	return Tool{Name: name, Risk: guard.Safe,
		Assess: func(args any) Assessment { return FromVerdict(g.Classify(args.(string))) },
		Run:    func(context.Context, auth.Caller, any) (any, error) { *ran++; return "ok", nil }}
}

// TestListedRiskOfPerCallTools: a tool whose risk is decided per call is
// never listed by its safe floor (issue 11).
func TestListedRiskOfPerCallTools(t *testing.T) {
	assess := func(any) Assessment { return Assessment{} }
	cases := []struct {
		name string
		tool Tool
		want ListedRisk
	}{
		{"exec-like", Tool{Risk: guard.Safe, Assess: assess}, ListedRisk{Risk: "dynamic", Floor: "safe", Ceiling: "dangerous"}},
		{"medium floor", Tool{Risk: guard.Medium, Assess: assess}, ListedRisk{Risk: "dynamic", Floor: "medium", Ceiling: "dangerous"}},
		{"declared ceiling", Tool{Risk: guard.Safe, RiskCeiling: guard.Medium, Assess: assess}, ListedRisk{Risk: "dynamic", Floor: "safe", Ceiling: "medium"}},
		{"ceiling equal to risk", Tool{Risk: guard.Safe, RiskCeiling: guard.Safe, Assess: assess}, ListedRisk{Risk: "safe"}},
		{"dangerous floor", Tool{Risk: guard.Dangerous, Assess: assess}, ListedRisk{Risk: "dangerous"}},
		{"no assess", Tool{Risk: guard.Safe}, ListedRisk{Risk: "safe"}},
		{"no assess medium", Tool{Risk: guard.Medium, RiskCeiling: guard.Dangerous}, ListedRisk{Risk: "medium"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tool.Listed(); got != tc.want {
				t.Fatalf("Listed = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestViewerToolsAreSafeAtEveryCall: registering a per-call-risk tool for
// viewers fails, so no viewer is offered one that looks safe.
func TestViewerToolsAreSafeAtEveryCall(t *testing.T) {
	d := New(Options{})
	viewers := []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}
	run := func(context.Context, auth.Caller, any) (any, error) { return nil, nil }
	assess := func(any) Assessment { return Assessment{} }
	if err := d.Register(Tool{Name: "exec.peek", Risk: guard.Safe, Roles: viewers, Assess: assess, Run: run}); err == nil {
		t.Fatal("a viewer tool with a per-call risk was registered")
	}
	if err := d.Register(Tool{Name: "file.peek", Risk: guard.Safe, RiskCeiling: guard.Safe, Roles: viewers, Assess: assess, Run: run}); err != nil {
		t.Fatalf("a viewer tool whose calls stay safe: %v", err)
	}
	if err := d.Register(Tool{Name: "exec.run", Risk: guard.Safe, Assess: assess, Run: run}); err != nil {
		t.Fatal(err)
	}
	if err := d.Replace(Tool{Name: "exec.run", Risk: guard.Safe, Roles: viewers, Assess: assess, Run: run}); err == nil {
		t.Fatal("Replace offered a per-call-risk tool to viewers")
	}
	for _, tl := range d.ToolsFor(viewer) {
		if tl.Listed().Risk != "safe" {
			t.Errorf("viewer offered %s listed %+v", tl.Name, tl.Listed())
		}
	}
	if !slices.ContainsFunc(d.ToolsFor(viewer), func(tl *Tool) bool { return tl.Name == "file.peek" }) {
		t.Error("file.peek not offered to viewers")
	}
}

// TestAuditRecordsCarryTheGuardVerdict: every record of a call that runs a
// command says what the guard found, whether the call ran directly, waited
// for an approval or ran once approved (issue 11).
func TestAuditRecordsCarryTheGuardVerdict(t *testing.T) {
	g := guard.New(guard.Config{})
	cases := []struct {
		cmd, label string
		rules      []string
	}{
		{"ls -la", "safe", nil},
		{"rm -rf ./build", "medium", nil},
		{"rm -rf /", "flagged", []string{guard.RuleRmRfRoot}},
		{`perl -e "system(q{rm -rf /})"`, "flagged", []string{guard.RuleInlineProgram, guard.RuleRmRfRoot}},
		{`eval "$CMD"`, "dynamic", []string{guard.RuleDynamicCode}},
	}
	check := func(t *testing.T, au *memAudit, verdict, label string, rules []string) {
		t.Helper()
		e := au.last()
		if e.Verdict != verdict || e.Detail["guard"] != label {
			t.Fatalf("record verdict %q guard %v, want %q %q (detail %v)", e.Verdict, e.Detail["guard"], verdict, label, e.Detail)
		}
		if got, _ := e.Detail["rules"].([]string); len(rules) > 0 && !slices.Equal(got, rules) {
			t.Fatalf("record rules %v, want %v", got, rules)
		}
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			ran := 0
			au := &memAudit{}
			d := New(Options{Audit: au})
			d.MustRegister(commandTool(g, "exec.run", &ran))
			if _, err := d.Dispatch(context.Background(), agent, "exec.run", tc.cmd); err != nil || ran != 1 {
				t.Fatalf("direct: ran %d, %v", ran, err)
			}
			check(t, au, "allowed", tc.label, tc.rules)

			answer := error(&ApprovalRequired{ID: "ap_1"})
			au = &memAudit{}
			d = New(Options{Audit: au, Policy: policyFunc(func(Assessment) (Decision, string) { return NeedsApproval, "test" }),
				Approvals: approvalsFunc(func() error { return answer })})
			d.MustRegister(commandTool(g, "exec.run", &ran))
			_, _ = d.Dispatch(context.Background(), agent, "exec.run", tc.cmd)
			check(t, au, "pending", tc.label, tc.rules)
			answer = nil
			if _, err := d.Dispatch(context.Background(), agent, "exec.run", tc.cmd); err != nil || ran != 2 {
				t.Fatalf("approved: ran %d, %v", ran, err)
			}
			check(t, au, "approved", tc.label, tc.rules)
		})
	}
	// A call that runs no command has no guard verdict to show.
	au := &memAudit{}
	d := New(Options{Audit: au})
	d.MustRegister(Tool{Name: "file.read", Risk: guard.Safe, Run: func(context.Context, auth.Caller, any) (any, error) { return nil, nil }})
	_, _ = d.Dispatch(context.Background(), agent, "file.read", nil)
	if _, ok := au.last().Detail["guard"]; ok {
		t.Fatalf("file.read record has a guard verdict: %v", au.last().Detail)
	}
}

func TestGuardVerdictMerge(t *testing.T) {
	var g *GuardVerdict
	g = g.Merge(nil)
	if g != nil {
		t.Fatal("merge of nothing is something")
	}
	g = g.Merge(&GuardVerdict{Risk: guard.Safe})
	g = g.Merge(&GuardVerdict{Risk: guard.Dangerous, Rules: []string{"rm-rf-root"}})
	if g.Label() != "flagged" {
		t.Fatalf("label %q", g.Label())
	}
	g = g.Merge(&GuardVerdict{Risk: guard.Dangerous, Dynamic: true, Rules: []string{"rm-rf-root", "dynamic-code"}})
	if g.Label() != "dynamic" || !slices.Equal(g.Rules, []string{"rm-rf-root", "dynamic-code"}) {
		t.Fatalf("merged %+v", g)
	}
	if (GuardVerdict{}).Label() != "dangerous" {
		t.Fatal("an empty verdict must not read as safe")
	}
}
