package workspace

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/policy"
)

// TestFileToolsGivePolicyTheirPaths: issue 38 row 6. Under paths.deny
// ["*.pem","/etc/**"], file.read /etc/passwd, file.list /etc, file.grep
// /etc and file.read /workspace/k.pem all ran: the file tools told the
// policy no path. Every file tool whose arguments name a path (a "path"
// or "file" property) must now be refused for one below /etc, and the
// walks for a directory above it.
func TestFileToolsGivePolicyTheirPaths(t *testing.T) {
	s := New(Config{Policy: DefaultPolicy()})
	t.Cleanup(s.Close)
	tools := map[string]dispatch.Tool{}
	for _, tl := range Tools(s) {
		tools[tl.Name] = tl
	}
	r := policy.Default().Roles["agent"]
	r.Paths = policy.Lists{Deny: []string{"*.pem", "/etc/**"}}
	decide := func(t *testing.T, name, args string) (dispatch.Decision, string) {
		t.Helper()
		tl := tools[name]
		a, err := tl.Decode(json.RawMessage(args))
		if err != nil {
			t.Fatalf("%s %s: %v", name, args, err)
		}
		return policy.Evaluate(r, name, tl.AssessArgs(a))
	}

	cases := []struct {
		name, tool, args string
		want             dispatch.Decision
	}{
		{"read /etc/passwd", ToolRead.Name(), `{"file":"/etc/passwd"}`, dispatch.Deny},
		{"read a pem", ToolRead.Name(), `{"file":"/workspace/k.pem"}`, dispatch.Deny},
		{"read a relative pem", ToolRead.Name(), `{"file":"k.pem"}`, dispatch.Deny},
		{"list /etc", ToolList.Name(), `{"path":"/etc"}`, dispatch.Deny},
		{"grep /etc", ToolGrep.Name(), `{"path":"/etc","pattern":"root"}`, dispatch.Deny},
		{"grep / reaches /etc", ToolGrep.Name(), `{"path":"/","pattern":"root"}`, dispatch.Deny},
		{"find / reaches /etc", ToolFind.Name(), `{"path":"/","glob":"*"}`, dispatch.Deny},
		{"recursive list of / reaches /etc", ToolList.Name(), `{"path":"/","recursive":true}`, dispatch.Deny},
		{"editor view", ToolEditor.Name(), `{"command":"view","path":"/etc/hostname"}`, dispatch.Deny},
		{"write a pem", ToolWrite.Name(), `{"file":"/workspace/new.pem","content":"x"}`, dispatch.Deny},
		{"read in /workspace", ToolRead.Name(), `{"file":"/workspace/notes.txt"}`, dispatch.Allow},
		{"grep /workspace", ToolGrep.Name(), `{"path":"/workspace","pattern":"x"}`, dispatch.Allow},
		{"flat list of /", ToolList.Name(), `{"path":"/"}`, dispatch.Allow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := decide(t, tc.tool, tc.args); got != tc.want {
				t.Fatalf("%s %s: decision %v (%s), want %v", tc.tool, tc.args, got, why, tc.want)
			}
		})
	}

	// Every tool that names a path, not only the ones above.
	noPath := []string{ToolWatchList.Name(), ToolWatchPoll.Name(), ToolWatchEvents.Name(), ToolWatchDelete.Name()} // a watcher id, not a path
	for _, tl := range Tools(s) {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		_, hasPath := schema.Properties["path"]
		_, hasFile := schema.Properties["file"]
		if !hasPath && !hasFile {
			if !slices.Contains(noPath, tl.Name) {
				t.Errorf("%s names no path; list it in noPath if that is right", tl.Name)
			}
			continue
		}
		args := `{"path":"/etc/shadow","file":"/etc/shadow","pattern":"x","glob":"*","regex":"x","command":"view","content":"x","old_str":"a","new_str":"b","file_text":"x"}`
		if got, why := decide(t, tl.Name, args); got != dispatch.Deny {
			t.Errorf("%s on /etc/shadow: decision %v (%s), want deny", tl.Name, got, why)
		}
	}
}
