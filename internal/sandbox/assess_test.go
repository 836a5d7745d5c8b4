package sandbox

import (
	"slices"
	"testing"

	"github.com/sandhold/sandhold/internal/guard"
)

// TestAssessCommandCarriesTheGuardVerdict: exec.run, shell and bash rate a
// command through AssessCommand, whose Assessment keeps the guard's own
// verdict for the audit record apart from the call's risk (sudo raises
// the risk, not the verdict).
func TestAssessCommandCarriesTheGuardVerdict(t *testing.T) {
	g := guard.New(guard.Config{})
	cases := []struct {
		name  string
		req   ExecRequest
		risk  guard.Risk
		label string
	}{
		{"safe", ExecRequest{Command: "ls -la"}, guard.Safe, "safe"},
		{"sudo raises the risk only", ExecRequest{Command: "ls", Sudo: true}, guard.Dangerous, "safe"},
		{"argv", ExecRequest{Argv: []string{"perl", "-e", "system(q{rm -rf /})"}}, guard.Dangerous, "flagged"},
		{"dynamic", ExecRequest{Command: `python3 -c 'exec(input())'`}, guard.Dangerous, "dynamic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := AssessCommand(g, tc.req)
			if a.Risk != tc.risk || a.Guard == nil || a.Guard.Label() != tc.label {
				t.Fatalf("risk %v guard %+v, want %v %q", a.Risk, a.Guard, tc.risk, tc.label)
			}
			if tc.label == "flagged" && !slices.Contains(a.Guard.Rules, guard.RuleRmRfRoot) {
				t.Fatalf("rules %v", a.Guard.Rules)
			}
		})
	}
}
