package orphan

import (
	"context"
	"errors"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

func TestMarksNameOneSandbox(t *testing.T) {
	ctx := context.Background()
	if _, ok := Of(ctx, "a"); ok {
		t.Error("an unmarked request is an orphan's")
	}
	if _, ok := LostOf(ctx, "a"); ok {
		t.Error("an unmarked request is a lost sandbox's")
	}
	o := With(ctx, "a", "node-1")
	if from, ok := Of(o, "a"); !ok || from != "node-1" {
		t.Errorf("Of(a) = %q, %v; want node-1, true", from, ok)
	}
	if _, ok := Of(o, "b"); ok {
		t.Error("the mark of sandbox a is taken for sandbox b")
	}
	if _, ok := Of(With(ctx, "a", ""), "a"); ok {
		t.Error("a mark without a node is an orphan's")
	}
	if _, ok := LostOf(o, "a"); ok {
		t.Error("an orphan's mark is a lost sandbox's")
	}
	l := WithLost(ctx, "a", "node-2", "key-1")
	if got, ok := LostOf(l, "a"); !ok || got != (Lost{ID: "a", Node: "node-2", Owner: "key-1"}) {
		t.Errorf("LostOf(a) = %+v, %v", got, ok)
	}
	if _, ok := LostOf(l, "b"); ok {
		t.Error("the lost mark of sandbox a is taken for sandbox b")
	}
	if _, ok := Of(l, "a"); ok {
		t.Error("a lost sandbox's mark is an orphan's")
	}
}

// TestResolve: a miss is answered by the request's mark — lost (the
// owner's and admins' to know), adopted (then looked up again) or none.
func TestResolve(t *testing.T) {
	miss := errors.New("not found")
	here := false
	get := func() (string, error) {
		if here {
			return "sandbox", nil
		}
		return "", miss
	}
	adopted := 0
	adopt := func(refused error) error {
		if !errors.Is(refused, miss) {
			t.Errorf("adopt saw %v, want the miss", refused)
		}
		adopted++
		here = true
		return nil
	}
	ctx := context.Background()
	lost := WithLost(ctx, "a", "node-2", "k1")
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		key   string
		admin bool
		want  fault.Kind
		miss  bool
	}{
		{"unmarked", ctx, "k1", false, fault.NotFound, true},
		{"lost, the owner", lost, "k1", false, fault.Unavailable, false},
		{"lost, an admin", lost, "k9", true, fault.Unavailable, false},
		{"lost, another key", lost, "k2", false, fault.NotFound, true},
	} {
		_, err := Resolve(tc.ctx, "a", tc.key, tc.admin, get, adopt)
		if tc.miss && !errors.Is(err, miss) || !tc.miss && fault.KindOf(err) != tc.want {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if adopted != 0 {
		t.Fatal("a sandbox that is not an orphan was adopted")
	}
	got, err := Resolve(With(ctx, "a", "node-1"), "a", "k1", false, get, adopt)
	if err != nil || got != "sandbox" || adopted != 1 {
		t.Errorf("an orphan: %q, %v, adopted %d", got, err, adopted)
	}
	refused := errors.New("refused")
	here = false
	if _, err := Resolve(With(ctx, "a", "node-1"), "a", "k1", false, get, func(error) error { return refused }); !errors.Is(err, refused) {
		t.Errorf("a refused take-over: %v", err)
	}
}
