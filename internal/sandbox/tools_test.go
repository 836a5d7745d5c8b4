package sandbox

import (
	"math"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/execrun"
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
				if got := execrun.CheckTimeout(secondsToDuration(*c.timeout)); (got == nil) != c.ok {
					t.Fatalf("CheckTimeout disagrees with Validate: %v", got)
				}
			}
		})
	}
	if execrun.CheckTimeout(time.Nanosecond) != nil || execrun.CheckTimeout(-time.Second) == nil {
		t.Fatal("CheckTimeout: wrong bounds")
	}
}
