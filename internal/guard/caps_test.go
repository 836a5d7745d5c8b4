package guard

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCaps feeds hostile shapes near the input cap and checks that each
// cap turns into a Dangerous verdict (or a correct one) instead of
// unbounded work. Durations are logged for the reader, never asserted.
func TestCaps(t *testing.T) {
	g := New(Config{})
	n := maxInputBytes / 4
	tests := []struct {
		name  string
		cmd   string
		risk  Risk
		rules []string
	}{
		{"cmdsubst-nesting", strings.Repeat("$(", n/2) + strings.Repeat(")", n/2), D, []string{RuleTooComplex}},
		{"subshell-nesting", strings.Repeat("(", n/2) + "a" + strings.Repeat(")", n/2), D, []string{RuleTooComplex}},
		{"nesting-at-cap-ok", strings.Repeat("( ", maxNesting) + "rm -rf /" + strings.Repeat(" )", maxNesting), D, []string{RuleRmRfRoot}},
		{"nesting-over-cap", strings.Repeat("( ", maxNesting+1) + "ls" + strings.Repeat(" )", maxNesting+1), D, []string{RuleTooComplex}},
		{"long-pipeline", strings.Repeat("a|", n) + "a", D, []string{RuleTooComplex}},
		{"many-commands", strings.Repeat("ls;", n), D, []string{RuleTooComplex}},
		{"many-function-calls", "f(){ ls; }; " + strings.Repeat("f;", n/2), D, []string{RuleTooComplex}},
		{"many-heredocs", strings.Repeat("bash <<E\nls\nE\n", n/15), D, []string{RuleTooComplex}},
		{"alias-called-often", "alias a='" + strings.Repeat("b ", 20000) + "'; " + strings.Repeat("a;", 50000), D, []string{RuleTooComplex}},
		{"function-call-tree", funcTree(30), D, []string{RuleTooComplex}},
		{"brace-combinatorial-name", strings.Repeat("{a,b}", n/5), D, []string{RuleDynamicCommand}},
		{"brace-combinatorial-arg", "echo " + strings.Repeat("{a,b}", n/5), S, nil},
		{"brace-sequences", "echo " + strings.Repeat("x{1..300} ", n/10), S, nil},
		{"long-quotes", "echo " + strings.Repeat(`"a"'b'`, n/7), S, nil},
		{"long-ansi-c", "echo $'" + strings.Repeat(`\x41`, n/5) + "'", S, nil},
		{"many-program-calls", "python3 -c '" + strings.Repeat(`system("ls");`, n/16) + "'", M, []string{RuleInlineProgram}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			v := g.Classify(tc.cmd)
			t.Logf("%d bytes in %v, %d commands", len(tc.cmd), time.Since(start), len(v.Commands))
			if v.Risk != tc.risk || !sameSet(v.Rules, tc.rules) {
				t.Errorf("got %v %v, want %v %v", v.Risk, v.Rules, tc.risk, tc.rules)
			}
			if len(v.Commands) > maxCommands || len(v.Reasons) > maxReasons+1 {
				t.Errorf("verdict not bounded: %d commands, %d reasons", len(v.Commands), len(v.Reasons))
			}
		})
	}
}

// funcTree defines f0 … fn where each f calls the next twice with an
// argument: walking every call would take 2^n steps.
func funcTree(n int) string {
	var b strings.Builder
	for i := n; i > 0; i-- {
		fmt.Fprintf(&b, "f%d() { f%d x; f%d y; }; ", i-1, i, i)
	}
	fmt.Fprintf(&b, "f%d() { ls \"$1\"; }; f0 z", n)
	return b.String()
}
