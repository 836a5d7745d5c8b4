package orphan

import (
	"context"
	"testing"
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
