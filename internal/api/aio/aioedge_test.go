package aio

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/api"
	"github.com/sandhold/sandhold/internal/fault"
)

type decodeProbe struct {
	Sandbox string   `json:"sandbox,omitempty"`
	Name    string   `json:"name" required:"true"`
	Count   *int     `json:"count,omitempty"`
	Mode    string   `json:"mode,omitempty" enum:"a,b"`
	Ratio   float64  `json:"ratio,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

func (p decodeProbe) Validate() error {
	if p.Name == "bad" {
		return fault.InvalidField("name", "name must not be bad")
	}
	return nil
}

// TestDecodeAIO: pydantic's rules, one case per rule.
func TestDecodeAIO(t *testing.T) {
	cases := []struct {
		name, body string
		typ, loc   string // "" typ: accepted
		count      int
	}{
		{"minimal", `{"name":"x"}`, "", "", 0},
		{"unknown-ignored", `{"name":"x","other":[1]}`, "", "", 0},
		{"null-is-absent", `{"name":"x","count":null}`, "", "", 0},
		{"int", `{"name":"x","count":3}`, "", "", 3},
		{"integral-float", `{"name":"x","count":3.0}`, "", "", 3},
		{"numeric-string", `{"name":"x","count":" 7 "}`, "", "", 7},
		{"fraction", `{"name":"x","count":3.5}`, "int_from_float", "count", 0},
		{"overflow", `{"name":"x","count":1e309}`, "finite_number", "count", 0},
		{"bool-for-int", `{"name":"x","count":true}`, "int_type", "count", 0},
		{"word-for-int", `{"name":"x","count":"three"}`, "int_type", "count", 0},
		{"missing", `{}`, "missing", "name", 0},
		{"null-required", `{"name":null}`, "missing", "name", 0},
		{"wrong-type", `{"name":5}`, "string_type", "name", 0},
		{"list-type", `{"name":"x","tags":"a"}`, "list_type", "tags", 0},
		{"float-overflow", `{"name":"x","ratio":1e400}`, "finite_number", "ratio", 0},
		{"enum", `{"name":"x","mode":"c"}`, "enum", "mode", 0},
		{"validate", `{"name":"bad"}`, "value_error", "name", 0},
		{"array", `[]`, "model_attributes_type", "", 0},
		{"broken", `{"name":`, "json_invalid", "", 0},
		{"two-values", `{"name":"x"} {}`, "json_invalid", "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := decodeAIO[decodeProbe]([]byte(c.body), nil)
			if err == nil {
				err = shapeRules(v) // as a row whose body is AIO's own shape
			}
			if c.typ == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				got := 0
				if v.Count != nil {
					got = *v.Count
				}
				if got != c.count {
					t.Fatalf("count %d, want %d", got, c.count)
				}
				return
			}
			var inv *aioInvalid
			if !errors.As(err, &inv) || len(inv.Detail) != 1 || inv.Detail[0].Type != c.typ {
				t.Fatalf("got %#v, want one %s", err, c.typ)
			}
			loc := inv.Detail[0].Loc
			if loc[0] != "body" || (c.loc != "" && (len(loc) != 2 || loc[1] != c.loc)) || (c.loc == "" && len(loc) != 1) {
				t.Fatalf("loc %v, want body.%s", loc, c.loc)
			}
		})
	}
	// A row's own required fields count too, and every missing one is named.
	_, err := decodeAIO[decodeProbe]([]byte(`{}`), []string{"tags"})
	var inv *aioInvalid
	if !errors.As(err, &inv) || len(inv.Detail) != 2 {
		t.Fatalf("two missing fields: %v", err)
	}
}

// TestAIOTableRows: every row is unique, names its tool (or takes it from
// the request), and lives under /v1/ unless it is one of AIO's root
// routes; its group has an entry point.
func TestAIOTableRows(t *testing.T) {
	groups := map[string]bool{groupFile: true, groupShell: true, groupCode: true, groupTransfer: true, groupMCP: true, groupAuth: true,
		groupServices: true, groupBrowser: true, groupNode: true, groupProxy: true}
	seen := map[string]bool{}
	for _, rt := range aioTable {
		key := rt.Method + " " + rt.Path
		if seen[key] {
			t.Errorf("%s: two rows", key)
		}
		seen[key] = true
		if (rt.Tool == "") != rt.NamedTool {
			t.Errorf("%s: tool %q, named by the request %v", key, rt.Tool, rt.NamedTool)
		}
		if !strings.HasPrefix(rt.Path, "/v1/") && rt.Path != "/tickets" && rt.Path != "/auth" {
			t.Errorf("%s: not under /v1/", key)
		}
		if !groups[rt.Group] {
			t.Errorf("%s: group %q has no entry point", key, rt.Group)
		}
		if rt.serve == nil {
			t.Errorf("%s: no handler", key)
		}
		if got := aioRow(rt.Method, api.SandboxPrefix+rt.Path); got == nil || got.Path != rt.Path || got.Method != rt.Method {
			t.Errorf("%s: not found under %s", key, api.SandboxPrefix)
		}
	}
}
