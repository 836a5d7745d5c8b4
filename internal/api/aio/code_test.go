package aio

import (
	"errors"
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
		in, err := decodeAIO[CodeExecuteRequest]([]byte(c.body), nil)
		if err == nil {
			err = shapeRules(in)
		}
		var inv *aioInvalid
		if err != nil && !errors.As(err, &inv) {
			t.Errorf("%s: error %v is not AIO's 422", c.name, err)
			continue
		}
		switch {
		case c.wantTyp == "" && err != nil:
			t.Errorf("%s: unexpected errors %v", c.name, inv.Detail)
		case c.wantTyp != "" && (inv == nil || len(inv.Detail) != 1 || inv.Detail[0].Type != c.wantTyp || inv.Detail[0].Loc[1] != c.wantLoc):
			t.Errorf("%s: errors %v, want one %s at %s", c.name, inv, c.wantTyp, c.wantLoc)
		case c.wantTyp == "" && seconds(in.Timeout) != c.timeout:
			t.Errorf("%s: timeout %s, want %s", c.name, seconds(in.Timeout), c.timeout)
		}
	}
	for _, body := range []string{`[]`, `"x"`, `{`, `null`, `{} {}`} {
		_, err := decodeAIO[CodeExecuteRequest]([]byte(body), nil)
		var inv *aioInvalid
		if !errors.As(err, &inv) || len(inv.Detail) != 1 || len(inv.Detail[0].Loc) != 1 {
			t.Errorf("body %q: %v, want one error at body", body, err)
		}
	}
	// No body is {}: the required fields are missing, each named.
	_, err := decodeAIO[CodeExecuteRequest](nil, nil)
	var inv *aioInvalid
	if !errors.As(err, &inv) || len(inv.Detail) != 2 || inv.Detail[0].Type != "missing" {
		t.Errorf("empty body: %v, want code and language missing", err)
	}
	// An enum names its values.
	_, err = decodeAIO[CodeExecuteRequest]([]byte(`{"language":"cobol","code":"1"}`), nil)
	if !errors.As(err, &inv) || inv.Detail[0].Type != "enum" || inv.Detail[0].Msg != "Input should be 'python', 'javascript' or 'bash'" {
		t.Errorf("enum: %v", err)
	}
}
