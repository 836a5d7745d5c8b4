package proto

import (
	"strings"
	"testing"
)

func TestMatchGlob(t *testing.T) {
	cases := []struct {
		pattern, rel string
		want         bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "src/main.go", false},
		{"**/*.go", "main.go", true},
		{"**/*.go", "a/b/c/main.go", true},
		{"src/**", "src/a/b", true},
		{"src/**", "src", true},
		{"src/**/x.py", "src/x.py", true},
		{"src/**/x.py", "lib/x.py", false},
		{"**", "anything/at/all", true},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/d/c", false},
		{"[", "[", false}, // malformed: matches nothing
		{"?.txt", "a.txt", true},
	}
	for _, c := range cases {
		if got := MatchGlob(c.pattern, c.rel); got != c.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", c.pattern, c.rel, got, c.want)
		}
	}
	// Many "**" segments cannot blow up (the matcher is a table, not
	// backtracking); more than maxGlobSegments match nothing.
	long := strings.Repeat("**/", 60) + "x"
	if !MatchGlob(long, strings.Repeat("a/", 200)+"x") {
		t.Error("60 ** segments should match")
	}
	if MatchGlob(strings.Repeat("a/", 70)+"x", strings.Repeat("a/", 70)+"x") {
		t.Error("a pattern over maxGlobSegments must match nothing")
	}
}

func TestDenied(t *testing.T) {
	d := Deny{Names: []string{".env"}, Dirs: []string{".ssh", ".config/gh"}, Paths: []string{"/etc/shadow"}}
	for p, want := range map[string]bool{
		"/workspace/.env": true, "/workspace/x/.env": true, "/workspace/.envrc": false,
		"/workspace/.ssh": true, "/workspace/.ssh/id": true, "/workspace/a.ssh/id": false,
		"/w/.config/gh": true, "/w/.config/gh/h": true, "/w/config/gh": false,
		"/etc/shadow": true, "/etc/shadow/x": true, "/etc/shadowx": false, "": false,
	} {
		if got := d.Denied(p); got != want {
			t.Errorf("Denied(%q) = %v, want %v", p, got, want)
		}
	}
}

// FuzzMatchGlob: no pattern or path panics the matcher, and a literal
// path (no metacharacters) always matches itself.
func FuzzMatchGlob(f *testing.F) {
	f.Add("**/*.go", "a/b.go")
	f.Add("[a-", "x")
	f.Add("a/**/b/**/c", "a/x/b/y/c")
	f.Fuzz(func(t *testing.T, pattern, rel string) {
		_ = MatchGlob(pattern, rel)
		_ = MatchName([]string{pattern}, rel, rel)
		if rel != "" && !strings.ContainsAny(rel, `*?[\`) && !strings.Contains(rel, "//") &&
			!strings.HasPrefix(rel, "/") && !strings.HasSuffix(rel, "/") && strings.Count(rel, "/") < maxGlobSegments {
			if !MatchGlob(rel, rel) {
				t.Fatalf("literal %q does not match itself", rel)
			}
		}
	})
}
