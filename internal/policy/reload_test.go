package policy

import (
	"context"
	"testing"
)

// Two nodes share the stored policy: a change on one is in force on the
// other after Reload; a stored document that does not validate leaves the
// policy in force as it was.
func TestReloadFollowsAnotherNode(t *testing.T) {
	ctx := context.Background()
	st := &memSettings{}
	a, err := Load(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	doc := Default()
	r := doc.Roles["agent"]
	r.AllowUpTo, r.ApproveUpTo = "safe", "none"
	doc.Roles["agent"] = r
	if err := b.Set(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if a.Document().Roles["agent"].AllowUpTo == "safe" {
		t.Fatal("changed before reloading")
	}
	if err := a.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.Document().Roles["agent"]; got.AllowUpTo != "safe" || got.ApproveUpTo != "none" {
		t.Fatalf("after reload: %+v", got)
	}
	_ = st.PutSetting(ctx, SettingKey, []byte(`{"roles":{"root":{}}}`))
	if err := a.Reload(ctx); err == nil {
		t.Fatal("reload accepted an invalid stored policy")
	}
	if got := a.Document().Roles["agent"]; got.AllowUpTo != "safe" {
		t.Fatalf("an invalid stored policy changed the one in force: %+v", got)
	}
}
