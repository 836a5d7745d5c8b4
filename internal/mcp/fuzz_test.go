package mcp

import (
	"encoding/json"
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
)

// FuzzAliasArguments feeds hostile argument objects to the AIO alias
// translation: it must never panic, and what it passes on is a JSON object
// holding only keys the target tool's schema declares.
func FuzzAliasArguments(f *testing.F) {
	for _, seed := range []string{
		`{"action":"read","path":"/workspace/a","start_line":1}`,
		`{"action":"write","path":"a","content":"x","append":true,"encoding":"utf-8"}`,
		`{"action":"glob","path":"/","pattern":"**","show_hidden":true,"files_only":true}`,
		`{"cmd":"echo hi","timeout":30}`, `{"path":null}`, `[]`, `null`, `{"a":`, `{"__proto__":{}}`,
	} {
		f.Add([]byte(seed))
	}
	target := &dispatch.Tool{Name: "file.x", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"file":{},"path":{},"glob":{},"include_hidden":{},"content":{},"start_line":{}}}`)}
	props := schemaProps(target.InputSchema)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b bashArgs
		_ = decodeArgs(raw, &b)
		m, err := given(raw, fileParamNames)
		if err != nil {
			return
		}
		for _, act := range fileActions {
			out, err := fitArgs(target, m, act.params)
			if err != nil {
				continue
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: not an object: %s", act.action, out)
			}
			for k := range got {
				if !props[k] {
					t.Fatalf("%s: key %q is not in the target's schema: %s", act.action, k, out)
				}
			}
		}
	})
}
