package sandbox

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

// TestExecTimeoutOneRule: the exec timeout has one rule, (0, MaxTimeout]
// seconds, checked by ExecArgs.Validate for every caller of exec.run and
// by CheckTimeout (the same function) in Sandbox.Exec. Before, the tool's
// decoder let 0 and 1e-12 through while the native route refused them.
func TestExecTimeoutOneRule(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cases := []struct {
		name    string
		timeout *float64
		ok      bool
	}{
		{"absent-means-default", nil, true},
		{"one-second", f(1), true},
		{"fraction", f(0.5), true},
		{"maximum", f(MaxTimeout.Seconds()), true},
		{"zero", f(0), false},
		{"negative", f(-1), false},
		{"above-maximum", f(MaxTimeout.Seconds() + 1), false},
		{"nan", f(math.NaN()), false},
		{"infinite", f(math.Inf(1)), false},
		{"rounds-to-zero", f(1e-12), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ExecArgs{Command: "true", Timeout: c.timeout}.Validate()
			if (err == nil) != c.ok {
				t.Fatalf("Validate: %v, want ok=%v", err, c.ok)
			}
			if err != nil && fault.FieldOf(err) != "timeout" {
				t.Fatalf("error names field %q, want timeout", fault.FieldOf(err))
			}
			if c.timeout != nil && !math.IsNaN(*c.timeout) && !math.IsInf(*c.timeout, 0) {
				if got := CheckTimeout(secondsToDuration(*c.timeout)); (got == nil) != c.ok {
					t.Fatalf("CheckTimeout disagrees with Validate: %v", got)
				}
			}
		})
	}
	if CheckTimeout(time.Nanosecond) != nil || CheckTimeout(-time.Second) == nil {
		t.Fatal("CheckTimeout: wrong bounds")
	}
}

// TestExecToolDecodesStrictly: exec.run's JSON arguments are ExecArgs,
// read by dispatch's one decoder (strict: an unknown field is refused)
// and checked before the tool runs.
func TestExecToolDecodesStrictly(t *testing.T) {
	var exec dispatch.Tool
	for _, tl := range Tools(nil, guard.New(guard.Config{})) {
		if tl.Name == ToolExec.Name() {
			exec = tl
		}
		if !tl.Typed() {
			t.Errorf("%s is not declared with dispatch.Define", tl.Name)
		}
	}
	if _, err := exec.Decode(json.RawMessage(`{"command":"ls","tiemout":5}`)); err == nil {
		t.Fatal("an unknown field was accepted")
	}
	args, err := exec.Decode(json.RawMessage(`{"command":"ls","timeout":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Check(args); fault.FieldOf(err) != "timeout" {
		t.Fatalf("timeout 0 passed the check: %v", err)
	}
	d := dispatch.New(dispatch.Options{})
	d.MustRegister(exec)
	_, err = d.Call(context.Background(), auth.Caller{KeyID: "k", Role: auth.RoleAdmin}, ToolExec.Name(), json.RawMessage(`{"command":"ls","timeout":601}`))
	if !fault.Is(err, fault.Invalid) {
		t.Fatalf("timeout 601 through the dispatcher: %v, want invalid", err)
	}
}
