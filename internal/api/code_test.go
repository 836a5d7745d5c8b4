package api

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAIOBodyValidation(t *testing.T) {
	cases := []struct {
		name, body string
		wantTyp    string // "" = valid
		wantLoc    string
		timeout    time.Duration
	}{
		{"valid", `{"language":"python","code":"1","timeout":5}`, "", "", 5 * time.Second},
		{"null-timeout", `{"language":"python","code":"1","timeout":null}`, "", "", 0},
		{"integral-float", `{"language":"python","code":"1","timeout":5.0}`, "", "", 5 * time.Second},
		{"negative", `{"language":"python","code":"1","timeout":-1}`, "greater_than_equal", "timeout", 0},
		{"zero", `{"language":"python","code":"1","timeout":0}`, "greater_than_equal", "timeout", 0},
		{"over-max", `{"language":"python","code":"1","timeout":301}`, "less_than_equal", "timeout", 0},
		{"overflow", `{"language":"python","code":"1","timeout":1e309}`, "finite_number", "timeout", 0},
		{"fraction", `{"language":"python","code":"1","timeout":0.5}`, "int_from_float", "timeout", 0},
		// pydantic (lax mode) accepts a numeric string for an int, and so do we.
		{"string-timeout", `{"language":"python","code":"1","timeout":"5"}`, "", "", 5 * time.Second},
		{"bool-timeout", `{"language":"python","code":"1","timeout":true}`, "int_type", "timeout", 0},
		{"missing-code", `{"language":"python"}`, "missing", "code", 0},
		{"code-not-string", `{"language":"python","code":5}`, "string_type", "code", 0},
		{"stateful-not-bool", `{"language":"python","code":"1","stateful":"yes"}`, "bool_type", "stateful", 0},
		{"unknown-fields-ignored", `{"language":"python","code":"1","extra":{"a":1}}`, "", "", 0},
	}
	for _, c := range cases {
		r := httptest.NewRequest("POST", "/v1/code/execute", strings.NewReader(c.body))
		b, errs := readAIOBody(r)
		if errs != nil {
			t.Errorf("%s: body refused: %v", c.name, errs)
			continue
		}
		_ = b.str("language", true)
		_ = b.str("code", true)
		_ = b.boolean("stateful")
		got := b.timeout("timeout", 300)
		switch {
		case c.wantTyp == "" && b.errs != nil:
			t.Errorf("%s: unexpected errors %v", c.name, b.errs)
		case c.wantTyp != "" && (len(b.errs) != 1 || b.errs[0].Type != c.wantTyp || b.errs[0].Loc[1] != c.wantLoc):
			t.Errorf("%s: errors %v, want one %s at %s", c.name, b.errs, c.wantTyp, c.wantLoc)
		case c.wantTyp == "" && got != c.timeout:
			t.Errorf("%s: timeout %s, want %s", c.name, got, c.timeout)
		}
	}
	for _, body := range []string{`[]`, `"x"`, `{`, ``, `null`} {
		if _, errs := readAIOBody(httptest.NewRequest("POST", "/", strings.NewReader(body))); len(errs) != 1 {
			t.Errorf("body %q: %v, want one error", body, errs)
		}
	}
}
