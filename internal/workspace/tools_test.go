package workspace

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
)

// TestToolsAreTypedAndReadTheAIOWay: every file tool is declared with
// dispatch.Define, reads its arguments leniently (AIO ignores unknown
// fields) with one decoder, and lists its required fields in the schema
// derived from its argument type.
func TestToolsAreTypedAndReadTheAIOWay(t *testing.T) {
	s := New(Config{Policy: DefaultPolicy()})
	t.Cleanup(s.Close)
	required := map[string][]string{ToolRead.Name(): {"file"}, ToolWrite.Name(): {"file", "content"}, ToolEditor.Name(): {"command", "path"}, ToolGlob.Name(): {"path", "pattern"}}
	for _, tl := range Tools(s) {
		if !tl.Typed() {
			t.Errorf("%s is not declared with dispatch.Define", tl.Name)
		}
		var schema struct {
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil {
			t.Fatalf("%s: schema %s: %v", tl.Name, tl.InputSchema, err)
		}
		if want, ok := required[tl.Name]; ok && !slices.Equal(schema.Required, want) {
			t.Errorf("%s: required %v, want %v", tl.Name, schema.Required, want)
		}
		// The unknown field is ignored; the lenient decoder (AIO's) may
		// still name required fields this body leaves out, nothing else.
		if _, err := tl.Decode(json.RawMessage(`{"path":"/workspace","file":"/workspace/a","aio_only_option":1}`)); err != nil {
			var problems dispatch.ArgErrors
			if !errors.As(err, &problems) || slices.ContainsFunc(problems, func(p dispatch.ArgError) bool { return p.Type != "missing" }) {
				t.Errorf("%s refuses an unknown field: %v", tl.Name, err)
			}
		}
	}
	a, err := dispatch.DecodeArgs[ReadArgs](json.RawMessage(`{"file":"/workspace/a","start_line":"x"}`), true)
	if err == nil {
		t.Fatalf("a mistyped field decoded: %+v", a)
	}
}
