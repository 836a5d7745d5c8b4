package customtool

import (
	"encoding/json"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// Two nodes share the stored definitions: what one defines, redefines,
// publishes or deletes is in force on the other after Reload.
func TestReloadFollowsAnotherNode(t *testing.T) {
	st := &memSettings{}
	a, b := newFixture(t, st), newFixture(t, st)
	b.mustDefine(t, agent, `{"name":"lower","call":{"tool":"file.read"}}`)
	b.mustDefine(t, agent, `{"name":"upper","call":{"tool":"lower"}}`)
	if _, ok := a.d.Tool("upper"); ok {
		t.Fatal("registered before reloading")
	}
	if err := a.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.d.Call(ctx, agent, "upper", nil); err != nil {
		t.Fatalf("tool defined on b, called on a: %v", err)
	}
	if _, err := a.d.Call(ctx, agent2, "upper", nil); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("unpublished tool callable by another key on a: %v", err)
	}
	// Redefinition (now writes) and deletion on b reach a.
	b.mustDefine(t, agent, `{"name":"lower","call":{"tool":"file.write"}}`)
	if _, err := b.d.Call(ctx, agent, ToolDelete.Name(), json.RawMessage(`{"name":"upper"}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.d.Tool("upper"); ok {
		t.Fatal("tool deleted on b still registered on a")
	}
	if def, ok := a.r.Def(agent, "lower"); !ok || def.Call == nil || def.Call.Tool != "file.write" {
		t.Fatalf("redefinition not in force on a: %+v %v", def, ok)
	}
	if out, err := a.d.Call(ctx, agent, "lower", nil); err != nil || out != "written" {
		t.Fatalf("redefined tool on a: %v %v", out, err)
	}
	// A stored list that cannot be read changes nothing.
	_ = st.PutSetting(ctx, SettingKey, []byte("{"))
	if err := a.r.Reload(ctx); err == nil {
		t.Fatal("reload accepted a corrupt list")
	}
	if _, ok := a.d.Tool("lower"); !ok {
		t.Fatal("a corrupt stored list unregistered tools")
	}
}
