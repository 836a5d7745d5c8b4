package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// TestCustomToolsNeverTakeABuiltinsName: issue 38 row 1, across two keys.
// An agent's unpublished custom tool file.watch.create claimed the MCP
// name file_watch_create for every caller ('.' sorts before '_'): another
// key's tools/call file_watch_create ran the agent's tool, and the real
// tool vanished from lists. Names are now resolved per caller, built-ins
// first, and custom tools are listed as custom_<name>.
func TestCustomToolsNeverTakeABuiltinsName(t *testing.T) {
	r := newRig(t, dispatch.Options{}, Options{})
	ran := func(what string) func(context.Context, auth.Caller, any) (any, error) {
		return func(context.Context, auth.Caller, any) (any, error) { return what, nil }
	}
	owner := func(key string) func(auth.Caller) bool {
		return func(c auth.Caller) bool { return c.KeyID == key }
	}
	r.d.MustRegister(dispatch.Tool{Name: "file.watch_create", Risk: guard.Safe, Run: ran("builtin")})
	// Registered straight into the dispatcher: the name table must hold
	// even where customtool's own name check did not run.
	r.d.MustRegister(dispatch.Tool{Name: "file.watch.create", Risk: guard.Safe, Custom: true, Visible: owner("k-agent"), Run: ran("agent's custom")})
	r.d.MustRegister(dispatch.Tool{Name: "a_b.c", Risk: guard.Safe, Custom: true, Visible: owner("k-agent"), Run: ran("agent's a_b.c")})
	r.d.MustRegister(dispatch.Tool{Name: "a.b_c", Risk: guard.Safe, Custom: true, Visible: owner("k-agent2"), Run: ran("agent2's a.b_c")})

	cases := []struct {
		key   string
		list  []string
		calls map[string]string
	}{
		{"k-agent", []string{"custom_a_b_c", "custom_file_watch_create", "file_watch_create"},
			map[string]string{"file_watch_create": "builtin", "custom_file_watch_create": "agent's custom", "custom_a_b_c": "agent's a_b.c"}},
		{"k-agent2", []string{"custom_a_b_c", "file_watch_create"},
			map[string]string{"file_watch_create": "builtin", "custom_a_b_c": "agent2's a.b_c"}},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			cs := r.mustConnect(tc.key, nil)
			var got []string
			for _, n := range toolNames(t, cs) {
				if !slices.Contains(aliasNames(), n) {
					got = append(got, n)
				}
			}
			if !slices.Equal(got, tc.list) {
				t.Fatalf("tools/list %v, want %v", got, tc.list)
			}
			for name, want := range tc.calls {
				if res := call(t, cs, name, map[string]any{}); res.IsError || !strings.Contains(text(res), want) {
					t.Errorf("tools/call %s = %q (error %v), want %q", name, text(res), res.IsError, want)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	tools := []*dispatch.Tool{{Name: "a.b_c", Custom: true}, {Name: "file.watch.create", Custom: true}, {Name: "file.watch_create"}}
	cases := map[string]string{
		"file_watch_create":        "file.watch_create",
		"file.watch_create":        "file.watch_create",
		"file.watch.create":        "file.watch.create",
		"custom_file_watch_create": "file.watch.create",
		"custom_a_b_c":             "a.b_c",
		"a_b_c":                    "",
	}
	for name, want := range cases {
		got := ""
		if tl := Lookup(tools, name); tl != nil {
			got = tl.Name
		}
		if got != want {
			t.Errorf("Lookup(%q) = %q, want %q", name, got, want)
		}
	}
}
