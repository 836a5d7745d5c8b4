package daemon

import (
	"sort"
	"testing"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// TestEveryToolIsMetered: every tool the server registers counts against a
// rate-limit category, or is on ratelimit's unmetered list with its
// reason; every name on that list and on HALT's exempt list is a real
// tool (a renamed tool must not leave a stale entry behind).
func TestEveryToolIsMetered(t *testing.T) {
	t.Parallel()
	s := start(t, t.TempDir(), nil)
	registered := map[string]bool{}
	var unmetered []string
	free := ratelimit.Unmetered()
	for _, tl := range s.d.Dispatcher().Tools() {
		registered[tl.Name] = true
		if ratelimit.ForTool(tl.Name, tl.Category) == 0 && free[tl.Name] == "" {
			unmetered = append(unmetered, tl.Name)
		}
	}
	if len(unmetered) > 0 {
		sort.Strings(unmetered)
		t.Errorf("tools without a rate-limit category (add one, or list them in ratelimit's unmetered table with the reason): %v", unmetered)
	}
	for name := range free {
		if !registered[name] {
			t.Errorf("unmetered list names %s, which is not a tool", name)
		}
	}
	for name := range dispatch.HaltExempt() {
		if !registered[name] {
			t.Errorf("HALT's exempt list names %s, which is not a tool", name)
		}
	}
}
