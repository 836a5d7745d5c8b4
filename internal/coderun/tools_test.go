package coderun

import (
	"strconv"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"

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

// FuzzDecodeExecute: code.execute's JSON arguments (MCP, /v1/tools/call)
// never panic the decoder, and whatever it accepts is within the limits.
func FuzzDecodeExecute(f *testing.F) {
	f.Add([]byte(`{"language":"python","code":"1"}`))
	f.Add([]byte(`{"language":"bash","code":"ls","timeout":1e309}`))
	f.Add([]byte(`{"language":"javascript","code":"x","stateful":true,"session_id":"../x"}`))
	f.Add([]byte(`{"language":"python","code":"1","timeout":-1,"cwd":"relative"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := dispatch.DecodeArgs[ExecuteArgs](raw, true)
		if err != nil || a.Validate() != nil {
			return
		}
		r := a.Request()
		if err := CheckRequest(&r); err != nil {
			t.Fatalf("Validate accepted what CheckRequest refuses: %v", err)
		}
		if r.Timeout <= 0 || r.Timeout > MaxTimeout || len(r.Code) > MaxCodeBytes {
			t.Fatalf("accepted out-of-range request: %+v", r)
		}
		if _, ok := runtimes[r.Language]; !ok {
			t.Fatalf("accepted language %q", r.Language)
		}
		if r.SessionID != "" && CheckSessionID(r.SessionID) != nil {
			t.Fatalf("accepted session id %q", r.SessionID)
		}
	})
}

// TestNodeExecuteArgs: AIO's NodeJSExecuteRequest fields sandhold cannot
// honour are refused by name, never silently ignored.
func TestNodeExecuteArgs(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		name  string
		args  NodeExecuteArgs
		field string
	}{
		{"plain", NodeExecuteArgs{Code: "1"}, ""},
		{"empty-stdin", NodeExecuteArgs{Code: "1", Stdin: s("")}, ""},
		{"version", NodeExecuteArgs{Code: "1", Version: "node20"}, ""},
		{"stdin", NodeExecuteArgs{Code: "1", Stdin: s("x")}, "stdin"},
		{"files", NodeExecuteArgs{Code: "1", Files: map[string]string{"a.js": "1"}}, "files"},
		{"bad-version", NodeExecuteArgs{Code: "1", Version: "latest"}, "version"},
		{"bad-session", NodeExecuteArgs{Code: "1", Stateful: true, SessionID: "../x"}, "session_id"},
	} {
		err := c.args.Validate()
		if got := fault.FieldOf(err); (err == nil) != (c.field == "") || got != c.field {
			t.Errorf("%s: %v (field %q), want field %q", c.name, err, got, c.field)
		}
	}
}

// TestCellEnv: a cell's own env is taken for python and javascript,
// refused by name for bash (whose cells export their own) and past the cap.
func TestCellEnv(t *testing.T) {
	many := map[string]string{}
	for i := range maxCellEnv + 1 {
		many["V"+strconv.Itoa(i)] = "x"
	}
	for _, c := range []struct {
		name string
		r    Request
		ok   bool
	}{
		{"python", Request{Language: Python, Code: "1", Env: map[string]string{"A": "1"}}, true},
		{"javascript", Request{Language: JavaScript, Code: "1", Env: map[string]string{"A": "1"}}, true},
		{"bash", Request{Language: Bash, Code: "echo $A", Env: map[string]string{"A": "1"}}, false},
		{"over the cap", Request{Language: Python, Code: "1", Env: many}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRequest(&c.r)
			if (err == nil) != c.ok || (err != nil && !fault.Is(err, fault.Invalid)) {
				t.Fatalf("CheckRequest: %v, want ok %v", err, c.ok)
			}
		})
	}
}
