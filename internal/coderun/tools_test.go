package coderun

import (
	"testing"

	"github.com/sandhold/sandhold/internal/guard"
)

func TestAssess(t *testing.T) {
	g := guard.New(guard.Config{})
	cases := []struct {
		name    string
		lang    string
		code    string
		want    guard.Risk
		flagged bool
	}{
		{"bash-plain", Bash, "ls -la", guard.Safe, false},
		{"bash-rm-root", Bash, "rm -rf /", guard.Dangerous, true},
		{"bash-dynamic", Bash, `eval "$x"`, guard.Dangerous, true},
		{"python-plain", Python, "x = 41\nx + 1", guard.Medium, false},
		{"python-system-rm", Python, "import os\nos.system('rm -rf /')", guard.Dangerous, true},
		{"python-quote-escape", Python, "print('a'); import os; os.system('rm -rf ~')", guard.Dangerous, true},
		{"javascript-plain", JavaScript, "[1,2].map(x => x * 2)", guard.Medium, false},
		{"javascript-exec-rm", JavaScript, "require('child_process').execSync('rm -rf /')", guard.Dangerous, true},
	}
	for _, c := range cases {
		a := Assess(g, Request{Language: c.lang, Code: c.code})
		if a.Risk != c.want || a.Flagged() != c.flagged {
			t.Errorf("%s: risk %s flagged %v (rules %v), want %s flagged %v", c.name, a.Risk, a.Flagged(), a.Rules, c.want, c.flagged)
		}
	}
}
