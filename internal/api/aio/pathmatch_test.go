package aio

import (
	"strings"
	"testing"
)

// The request path runs matchTemplate (isAIOPath) for every request; it
// walks the strings instead of splitting them. This is the splitting
// version it replaced, kept as the reference the fuzz target compares
// against (the server's pathHasPrefix has its own, internal/api).

func matchTemplateSplit(tmpl, path string) bool {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if ps[i] == "" {
				return false
			}
			continue
		}
		if t != ps[i] {
			return false
		}
	}
	return true
}

var pathSeeds = [][2]string{
	{"/v1/shell/exec", "/v1/shell/exec"},
	{"/v1/file/{path}", "/v1/file/x"},
	{"/v1/file/{path}", "/v1/file/"},
	{"/v1/file/{path}", "/v1/file/x/"},
	{"/v1/a", "/v1/a/"},
	{"/v1/{}", "/v1/b"},
	{"/v1/{", "/v1/{"},
	{"", ""},
	{"/", "//"},
	{"/sandboxes/*/v1/file/upload", "/sandboxes/sb1/v1/file/upload"},
	{"/sandboxes/*/v1/artifacts/", "/sandboxes/sb1/v1/artifacts"},
	{"/sandboxes/*/v1/artifacts/", "/sandboxes/sb1/v1/artifacts/up_x/more"},
	{"/*", "/"},
	{"*", ""},
	{"/*/", "/a/b"},
}

// TestTemplateMatcherAgreesWithSplitting runs every AIO template against
// paths made from the templates, and the seeds, through both versions.
func TestTemplateMatcherAgreesWithSplitting(t *testing.T) {
	var paths []string
	for _, tmpl := range aioPaths {
		paths = append(paths, tmpl, strings.ReplaceAll(tmpl, "{", "x{"), tmpl+"/", strings.TrimSuffix(tmpl, "}"),
			strings.NewReplacer("{", "", "}", "").Replace(tmpl))
	}
	for _, sd := range pathSeeds {
		paths = append(paths, sd[1])
	}
	for _, tmpl := range append(aioPaths, "/v1/{}", "/v1/{", "", "/") {
		for _, p := range paths {
			if got, want := matchTemplate(tmpl, p), matchTemplateSplit(tmpl, p); got != want {
				t.Fatalf("matchTemplate(%q, %q) = %v, splitting says %v", tmpl, p, got, want)
			}
		}
	}
}

func FuzzMatchTemplate(f *testing.F) {
	for _, sd := range pathSeeds {
		f.Add(sd[0], sd[1])
	}
	f.Fuzz(func(t *testing.T, tmpl, path string) {
		if got, want := matchTemplate(tmpl, path), matchTemplateSplit(tmpl, path); got != want {
			t.Fatalf("matchTemplate(%q, %q) = %v, splitting says %v", tmpl, path, got, want)
		}
	})
}

// TestTemplateMatcherDoesNotAllocate: it runs on every request.
func TestTemplateMatcherDoesNotAllocate(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		isAIOPath("POST", "/v1/sandboxes/sb_0123456789/exec")
		isAIOPath("POST", "/sandboxes/sb_0123456789/v1/shell/exec")
		isAIOPath("GET", "/sandboxes/sb_0123456789/v1/browser/screenshot/a-rather-long-segment-to-pass-the-stack-buffer")
	})
	if n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// isAIOPathLinear is isAIOPath before the namespace index: every template
// in aioPaths order.
func isAIOPathLinear(method, path string) bool {
	if rest, ok := strings.CutPrefix(path, "/sandboxes/"); ok {
		_, after, found := strings.Cut(rest, "/")
		if !found {
			return false
		}
		path = "/" + after
	}
	if !strings.HasPrefix(path, "/v1/") {
		return false
	}
	for _, tmpl := range aioPaths {
		if matchTemplateSplit(tmpl, path) {
			rt := aioRow(method, tmpl)
			return rt == nil || !rt.RealStatus
		}
	}
	return false
}

// TestIsAIOPathAgreesWithTheLinearScan: every AIO template, filled in, at
// both prefixes and with every method, is classified as the linear scan
// over aioPaths classified it; so are near misses.
func TestIsAIOPathAgreesWithTheLinearScan(t *testing.T) {
	fill := strings.NewReplacer("{", "x", "}", "")
	var paths []string
	for _, tmpl := range aioPaths {
		p := fill.Replace(tmpl)
		paths = append(paths, p, p+"/", tmpl, strings.TrimPrefix(p, "/v1"), "/sandboxes/sb1"+p, "/sandboxes/"+p, "/sandboxes/sb1"+p+"/x")
	}
	paths = append(paths, "/v1/", "/v1", "/v1/sandboxes/sb1/exec", "/sandboxes/sb1", "/v1//shell/exec")
	for _, m := range []string{"GET", "POST", "PUT", "DELETE", "HEAD"} {
		for _, p := range paths {
			if got, want := isAIOPath(m, p), isAIOPathLinear(m, p); got != want {
				t.Fatalf("isAIOPath(%s %q) = %v, the linear scan says %v", m, p, got, want)
			}
		}
	}
}
