package execenv

import (
	"slices"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// TestBuild: the caller's variables win over the base and come out
// sorted; a bad name, a NUL, too many variables and a loader hook from a
// non-admin are refused on env; an admin may set the hook, in any case.
func TestBuild(t *testing.T) {
	got, err := Build(map[string]string{"HOME": "/workspace", "PATH": "/bin"}, map[string]string{"PATH": "/x", "A_1": "v"}, false, 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"A_1=v", "HOME=/workspace", "PATH=/x"}; !slices.Equal(got, want) {
		t.Fatalf("Build = %v, want %v", got, want)
	}
	for _, c := range []struct {
		name  string
		user  map[string]string
		admin bool
	}{
		{"bad name", map[string]string{"1A": "v"}, true},
		{"NUL", map[string]string{"A": "a\x00b"}, true},
		{"too many", map[string]string{"A": "", "B": "", "C": ""}, true},
		{"loader hook", map[string]string{"LD_PRELOAD": "/x.so"}, false},
		{"hook in lower case", map[string]string{"ld_preload": "/x.so"}, false},
	} {
		if _, err := Build(Base(), c.user, c.admin, 2); fault.KindOf(err) != fault.Invalid {
			t.Errorf("%s: %v, want an invalid env", c.name, err)
		}
	}
	if _, err := Build(Base(), map[string]string{"LD_PRELOAD": "/x.so"}, true, 2); err != nil {
		t.Errorf("an admin's loader hook: %v", err)
	}
}
