package control

import (
	"context"
	"slices"
	"testing"
)

// Two nodes share one stored state: a HALT on one reaches the other's
// sandboxes through Refresh, and so does the unhalt, each node thawing
// only what it froze.
func TestRefreshFollowsAnotherNode(t *testing.T) {
	ctx := context.Background()
	st := &memSettings{}
	fa, fb := &fakeFreezer{running: []string{"a1", "a2"}}, &fakeFreezer{running: []string{"b1"}}
	a, err := Load(ctx, st, fa)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(ctx, st, fb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Halt(ctx, "key_admin", "incident"); err != nil {
		t.Fatal(err)
	}
	if h, _ := a.Halted(); h {
		t.Fatal("halted before refreshing")
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if h, reason := a.Halted(); !h || reason != "incident" || fa.freezes != 1 || !slices.Equal(a.State().Frozen, []string{"a1", "a2"}) {
		t.Fatalf("node a after refresh: halted=%v %q freezes=%d frozen=%v", h, reason, fa.freezes, a.State().Frozen)
	}
	// A second refresh of the same state freezes nothing again.
	if err := a.Refresh(ctx); err != nil || fa.freezes != 1 {
		t.Fatalf("refresh again: freezes=%d %v", fa.freezes, err)
	}
	if _, err := b.Unhalt(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := a.Halted(); h || !slices.Equal(fa.thawed, []string{"a1", "a2"}) || !slices.Equal(fb.thawed, []string{"b1"}) {
		t.Fatalf("after unhalt: halted=%v a thawed %v, b thawed %v", h, fa.thawed, fb.thawed)
	}
}

func TestRefreshKeepsStateOnUnreadableStore(t *testing.T) {
	ctx := context.Background()
	st := &memSettings{}
	c, err := Load(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Halt(ctx, "k", "r"); err != nil {
		t.Fatal(err)
	}
	_ = st.PutSetting(ctx, SettingKey, []byte("{not json"))
	if err := c.Refresh(ctx); err == nil {
		t.Fatal("refresh accepted a corrupt state")
	}
	if h, _ := c.Halted(); !h {
		t.Fatal("a corrupt stored state lifted the HALT")
	}
}
