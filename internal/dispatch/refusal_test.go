package dispatch_test

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
)

type refusalArgs struct {
	N int `json:"n"`
}

func (a refusalArgs) Validate() error {
	if a.N < 0 {
		return fault.InvalidField("n", "n must not be negative")
	}
	return nil
}

var (
	refusalTool  = dispatch.Ref[refusalArgs, int]("test.refusal")
	refusalOuter = dispatch.Ref[refusalArgs, int]("test.refusal_outer")
)

// TestArgumentRefusalIsMarked: the dispatcher's refusal of a call's
// arguments is marked as its own (dispatch.ArgsRefused) and keeps the
// rule's kind, field and message; the same kind of error from the tool's
// run is not marked, nor is a nested call's refusal that the run returns.
func TestArgumentRefusalIsMarked(t *testing.T) {
	d := dispatch.New(dispatch.Options{})
	d.MustRegister(dispatch.Define(refusalTool, dispatch.Spec{Description: "t", Risk: guard.Safe},
		func(_ context.Context, _ auth.Caller, a refusalArgs) (int, error) {
			if a.N == 13 {
				return 0, fault.InvalidField("n", "13 is refused as the tool runs")
			}
			return a.N, nil
		}, dispatch.Hooks[refusalArgs, int]{}))
	d.MustRegister(dispatch.Define(refusalOuter, dispatch.Spec{Description: "t", Risk: guard.Safe},
		func(ctx context.Context, _ auth.Caller, a refusalArgs) (int, error) {
			return refusalTool.CallWithin(ctx, refusalArgs{N: -a.N}, fault.New(fault.Internal, "not within"))
		}, dispatch.Hooks[refusalArgs, int]{}))
	agent := auth.Caller{KeyID: "k", Role: auth.RoleAgent}
	tests := []struct {
		name   string
		ref    dispatch.Ref[refusalArgs, int]
		n      int
		marked bool
	}{
		{"arguments against their rules", refusalTool, -1, true},
		{"refused as the tool runs", refusalTool, 13, false},
		{"a nested call's refusal, returned by the run", refusalOuter, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.ref.Call(context.Background(), d, agent, refusalArgs{N: tc.n})
			if fault.KindOf(err) != fault.Invalid || fault.FieldOf(err) != "n" {
				t.Fatalf("error %v: kind %s, field %q, want Invalid at n", err, fault.KindOf(err), fault.FieldOf(err))
			}
			if got := dispatch.ArgsRefused(err, string(tc.ref)); got != tc.marked {
				t.Fatalf("ArgsRefused = %v, want %v (%v)", got, tc.marked, err)
			}
		})
	}
}
