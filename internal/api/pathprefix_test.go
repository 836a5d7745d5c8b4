package api

import (
	"strings"
	"testing"
)

func TestPathHasPrefix(t *testing.T) {
	cases := []struct {
		name, path, prefix string
		want               bool
	}{
		{"plain prefix", "/v1/file/upload", "/v1/file/upload", true},
		{"plain, longer path", "/v1/artifacts/up_1", "/v1/artifacts/", true},
		{"plain, other path", "/v1/file/read", "/v1/file/upload", false},
		{"star matches an id", "/sandboxes/sb1/v1/file/upload", "/sandboxes/*/v1/file/upload", true},
		{"star needs a segment", "/sandboxes//v1/file/upload", "/sandboxes/*/v1/file/upload", false},
		{"star is one segment", "/sandboxes/a/b/v1/file/upload", "/sandboxes/*/v1/file/upload", false},
		{"other route below a sandbox", "/sandboxes/sb1/v1/file/write", "/sandboxes/*/v1/file/upload", false},
		{"json route below a sandbox", "/sandboxes/sb1/exec", "/sandboxes/*/v1/file/upload", false},
		{"artifact PATCH", "/sandboxes/sb1/v1/artifacts/up_x", "/sandboxes/*/v1/artifacts/", true},
		{"artifact create is capped", "/sandboxes/sb1/v1/artifacts", "/sandboxes/*/v1/artifacts/", false},
		{"shorter path", "/sandboxes", "/sandboxes/*/v1/file/upload", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := pathHasPrefix(c.path, c.prefix); got != c.want {
				t.Fatalf("pathHasPrefix(%q, %q) = %v", c.path, c.prefix, got)
			}
		})
	}
}

// FuzzPathHasPrefix: without a "*" it is strings.HasPrefix; with one, a
// match never spans more path segments than the pattern has.
func FuzzPathHasPrefix(f *testing.F) {
	f.Add("/sandboxes/sb1/v1/file/upload", "/sandboxes/*/v1/file/upload")
	f.Add("/v1/artifacts/x", "/v1/artifacts/")
	f.Add("//", "/*/")
	f.Fuzz(func(t *testing.T, p, prefix string) {
		got := pathHasPrefix(p, prefix)
		if want := pathHasPrefixSplit(p, prefix); got != want {
			t.Fatalf("pathHasPrefix(%q, %q) = %v, splitting says %v", p, prefix, got, want)
		}
		if !strings.Contains(prefix, "*") {
			if got != strings.HasPrefix(p, prefix) {
				t.Fatalf("pathHasPrefix(%q, %q) = %v, HasPrefix disagrees", p, prefix, got)
			}
			return
		}
		if got && strings.Count(p, "/") < strings.Count(prefix, "/") {
			t.Fatalf("pathHasPrefix(%q, %q) matched a shorter path", p, prefix)
		}
	})
}

// pathHasPrefix runs for every request (bodyLimitMiddleware); it walks the
// strings instead of splitting them. pathHasPrefixSplit is the splitting
// version it replaced, kept as the reference.
func pathHasPrefixSplit(p, prefix string) bool {
	if !strings.Contains(prefix, "*") {
		return strings.HasPrefix(p, prefix)
	}
	ps, qs := strings.Split(p, "/"), strings.Split(prefix, "/")
	if len(ps) < len(qs) {
		return false
	}
	for i, q := range qs {
		switch {
		case q == "*":
			if ps[i] == "" {
				return false
			}
		case i == len(qs)-1:
			if !strings.HasPrefix(ps[i], q) {
				return false
			}
		case ps[i] != q:
			return false
		}
	}
	return true
}

var prefixSeeds = [][2]string{
	{"/v1/shell/exec", "/v1/shell/exec"},
	{"/v1/a", "/v1/a/"},
	{"", ""},
	{"/", "//"},
	{"/sandboxes/*/v1/file/upload", "/sandboxes/sb1/v1/file/upload"},
	{"/sandboxes/*/v1/artifacts/", "/sandboxes/sb1/v1/artifacts"},
	{"/sandboxes/*/v1/artifacts/", "/sandboxes/sb1/v1/artifacts/up_x/more"},
	{"/*", "/"},
	{"*", ""},
	{"/*/", "/a/b"},
}

// TestPathHasPrefixAgreesWithSplitting runs every seed prefix against
// every seed path through both versions.
func TestPathHasPrefixAgreesWithSplitting(t *testing.T) {
	for _, sd := range prefixSeeds {
		for _, p := range prefixSeeds {
			if got, want := pathHasPrefix(p[1], sd[0]), pathHasPrefixSplit(p[1], sd[0]); got != want {
				t.Fatalf("pathHasPrefix(%q, %q) = %v, splitting says %v", p[1], sd[0], got, want)
			}
		}
	}
}

// TestPathHasPrefixDoesNotAllocate: it runs on every request.
func TestPathHasPrefixDoesNotAllocate(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		pathHasPrefix("/sandboxes/sb1/v1/file/write", "/sandboxes/*/v1/file/upload")
	})
	if n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}
