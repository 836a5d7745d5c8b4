package sandbox

import (
	"context"
	"slices"
	"testing"
)

// Every registered stop hook runs, in order (the sandbox's shutdown hooks,
// then what forgets its state: browser, observation).
func TestEveryStopHookRunsInOrder(t *testing.T) {
	m := newManager(t, testConfig(t), nil)
	var got []string
	for _, name := range []string{"hooks", "browser", "observe"} {
		m.BeforeStop(func(_ context.Context, s *Sandbox, reason string) {
			got = append(got, name+":"+reason+":"+s.ID())
		})
	}
	s := create(t, m, Spec{})
	if err := m.Delete(context.Background(), owner, s.ID()); err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	if want := []string{"hooks:delete:" + id, "browser:delete:" + id, "observe:delete:" + id}; !slices.Equal(got, want) {
		t.Fatalf("stop hooks ran %v, want %v", got, want)
	}
}
