package control

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/store/storetest"
)

// memSettings is the in-memory settings table shared by unit tests.
type memSettings = storetest.Settings

// fakeFreezer records freezes; running are the sandboxes HaltFreeze finds
// running.
type fakeFreezer struct {
	running []string
	thawed  []string
	freezes int
}

func (f *fakeFreezer) HaltFreeze(string) []string {
	f.freezes++
	r := f.running
	f.running = nil
	return r
}
func (f *fakeFreezer) HaltThaw(ids []string) int {
	f.thawed = append(f.thawed, ids...)
	return len(ids)
}

func TestHaltSurvivesRestartAndThawsWhatItFroze(t *testing.T) {
	ctx := context.Background()
	st := &memSettings{}
	f := &fakeFreezer{running: []string{"sb2", "sb1"}}
	c, err := Load(ctx, st, f)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := c.Halted(); h {
		t.Fatal("fresh server is halted")
	}
	if _, err := c.Halt(ctx, "k-admin", "investigating"); err != nil {
		t.Fatal(err)
	}
	if h, why := c.Halted(); !h || why != "investigating" {
		t.Fatalf("halted %v %q", h, why)
	}
	// Restart: a new Control over the same store is halted and freezes
	// what runs now (sb3 started before the restart finished).
	f2 := &fakeFreezer{running: []string{"sb3"}}
	c2, err := Load(ctx, st, f2)
	if err != nil {
		t.Fatal(err)
	}
	s := c2.State()
	if !s.Halted || s.By != "k-admin" || s.Since.IsZero() || f2.freezes != 1 {
		t.Fatalf("after restart: %+v (freezes %d)", s, f2.freezes)
	}
	if len(s.Frozen) != 3 || s.Frozen[0] != "sb1" || s.Frozen[2] != "sb3" {
		t.Fatalf("frozen %v", s.Frozen)
	}
	if _, err := c2.Unhalt(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := c2.Halted(); h || len(f2.thawed) != 3 {
		t.Fatalf("unhalt: halted %v, thawed %v", h, f2.thawed)
	}
	c3, err := Load(ctx, st, &fakeFreezer{})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := c3.Halted(); h {
		t.Fatal("unhalt was not stored")
	}
}

func TestCorruptStateFailsTheStart(t *testing.T) {
	st := &memSettings{}
	_ = st.PutSetting(context.Background(), SettingKey, []byte("{"))
	if _, err := Load(context.Background(), st, nil); err == nil {
		t.Fatal("loaded a corrupt halt state")
	}
}
