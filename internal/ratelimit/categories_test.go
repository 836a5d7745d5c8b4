package ratelimit

import (
	"strings"
	"testing"
)

// TestForTool: commands count against Command, code against Exec ("code"),
// other categories are untouched.
func TestForTool(t *testing.T) {
	for _, c := range []struct {
		tool     string
		declared Category
		want     Category
	}{
		{"exec.run", Exec, Command},
		{"shell.exec", Exec, Command},
		{"shell.write", Exec, Command},
		{"bash.exec", Exec, Command},
		{"code.execute", Exec, Exec},
		{"code.session.create", Exec, Exec},
		{"jupyter.execute", Exec, Exec},
		{"shell.terminal", Terminal, Terminal},
		{"file.read", File, File},
		{"execute.thing", Exec, Exec}, // tricky: "exec" without the dot
		{"exec.run2", Exec, Exec},     // exact name only
		{"exec.read", Exec, Exec},
		{"bashful", Exec, Exec},
	} {
		if got := ForTool(c.tool, c.declared); got != c.want {
			t.Errorf("ForTool(%s, %s) = %s, want %s", c.tool, c.declared, got, c.want)
		}
	}
}

func TestDefaultsSplitCodeAndCommands(t *testing.T) {
	d := DefaultRules()
	if r := d[Exec]; r.PerMinute != 10 || Exec.String() != "code" {
		t.Errorf("code: %+v (%s), want 10/min named code", r, Exec)
	}
	if r := d[Command]; r.PerMinute != DefaultCommandPerMinute || r.Burst != DefaultCommandBurst || Command.String() != "command" {
		t.Errorf("command: %+v (%s)", r, Command)
	}
	if r := d[File]; r.PerMinute != 100 {
		t.Errorf("file: %+v", r)
	}
	if r := d[Browser]; r.PerMinute != 20 {
		t.Errorf("browser: %+v", r)
	}
	if r := d[Terminal]; r.Concurrent != 5 {
		t.Errorf("terminal: %+v", r)
	}
	if c, err := ParseCategory("exec"); err != nil || c != Exec {
		t.Errorf("legacy name exec: %v %v", c, err)
	}
	for _, c := range Categories() {
		if got, err := ParseCategory(c.String()); err != nil || got != c {
			t.Errorf("round trip %s: %v %v", c, got, err)
		}
	}
}

// TestCommandsDoNotEatCodeBudget: with the defaults, the 11th command in a
// minute is allowed (it was refused when commands counted as code).
func TestCommandsDoNotEatCodeBudget(t *testing.T) {
	l := New(Options{})
	for i := 0; i < 50; i++ {
		if d := l.Allow("k", ForTool("shell.exec", Exec)); !d.Allowed {
			t.Fatalf("command %d refused: %+v", i+1, d)
		}
	}
	if d := l.Allow("k", ForTool("code.execute", Exec)); !d.Allowed || d.Limit != DefaultExecBurst {
		t.Fatalf("code after 50 commands: %+v", d)
	}
}

func TestParseRules(t *testing.T) {
	good := []struct {
		name, spec string
		want       Rules
	}{
		{"issue example", "code=10/m,command=300/m", Rules{Exec: {PerMinute: 10, Burst: 10}, Command: {PerMinute: 300, Burst: 300}}},
		{"burst", "command=300/m:60", Rules{Command: {PerMinute: 300, Burst: 60}}},
		{"per second", "file=2/s", Rules{File: {PerMinute: 120, Burst: 120}}},
		{"per hour", "browser=120/h", Rules{Browser: {PerMinute: 2, Burst: 2}}},
		{"tiny per hour keeps burst 1", "code=6/h", Rules{Exec: {PerMinute: 0.1, Burst: 1}}},
		{"terminal is a cap", "terminal=3", Rules{Terminal: {Concurrent: 3}}},
		{"spaces and empty items", " code = 5/m , ,file=50/m ", Rules{Exec: {PerMinute: 5, Burst: 5}, File: {PerMinute: 50, Burst: 50}}},
		{"legacy exec", "exec=20/m", Rules{Exec: {PerMinute: 20, Burst: 20}}},
		{"empty", "", Rules{}},
	}
	for _, c := range good {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRules(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Fatalf("%s: got %+v, want %+v", k, got[k], v)
				}
			}
		})
	}
	for _, c := range []struct{ name, spec string }{
		{"unknown category", "cpu=1/m"},
		{"no equals", "code"},
		{"no unit", "code=10"},
		{"bad unit", "code=10/d"},
		{"zero", "code=0/m"},
		{"negative", "code=-1/m"},
		{"NaN", "code=NaN/m"},
		{"Inf", "code=Inf/m"},
		{"huge", "code=1e300/m"},
		{"bad burst", "code=10/m:0"},
		{"terminal with unit", "terminal=5/m"},
		{"twice", "code=1/m,exec=2/m"},
		{"too long", strings.Repeat("code=1/m,", 200)},
	} {
		t.Run("bad/"+c.name, func(t *testing.T) {
			if r, err := ParseRules(c.spec); err == nil {
				t.Fatalf("accepted %q as %v", c.spec, r)
			}
		})
	}
}
