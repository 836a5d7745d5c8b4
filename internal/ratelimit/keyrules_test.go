package ratelimit

import (
	"strings"
	"testing"
)

func TestParseKeyRules(t *testing.T) {
	for _, tc := range []struct {
		name, spec, want, err string
	}{
		{name: "command per minute", spec: "command=2/m", want: "command=2/m:2"},
		{name: "legacy exec name is code", spec: "exec=5/m:3", want: "code=5/m:3"},
		{name: "per second", spec: "file=1/s", want: "file=60/m:60"},
		{name: "order is canonical", spec: "browser=3/m, file=4/m", want: "file=4/m:4,browser=3/m:3"},
		{name: "empty", spec: "", want: ""},
		{name: "terminal is not per key", spec: "terminal=2", err: "not settable per key"},
		{name: "auth failures are per address", spec: "auth_failure=3/m", err: "not settable per key"},
		{name: "unknown category", spec: "bogus=1/m", err: "unknown rate-limit category"},
		{name: "bad unit", spec: "command=1/d", err: "unit"},
		{name: "twice", spec: "command=1/m,command=2/m", err: "named twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseKeyRules(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseKeyRules(%q) err = %v, want %q", tc.spec, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			back, err := ParseKeyRules(r.String())
			if err != nil || back.String() != r.String() {
				t.Fatalf("round trip: %v %q", err, back.String())
			}
		})
	}
}

func TestRulesWithin(t *testing.T) {
	maxima := DefaultRules() // command 300/m burst 60, code 10/m burst 10
	for _, tc := range []struct {
		name, spec string
		ok         bool
	}{
		{"below", "command=2/m", true},
		{"equal", "command=300/m:60", true},
		{"rate above", "command=301/m:10", false},
		{"burst above", "code=5/m:11", false},
		{"implicit burst above", "file=200/m", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseKeyRules(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			err = r.Within(maxima)
			if (err == nil) != tc.ok {
				t.Fatalf("Within = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// A category the server does not limit accepts any rule.
	r, _ := ParseKeyRules("browser=1000/m")
	if err := r.Within(Rules{}); err != nil {
		t.Fatalf("unlimited server: %v", err)
	}
}
