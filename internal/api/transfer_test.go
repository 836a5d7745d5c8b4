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
