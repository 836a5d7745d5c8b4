package gates

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// directDeps reads go.mod with the go command's own parser.
func directDeps(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mf struct {
		Require []struct {
			Path     string
			Indirect bool
		}
	}
	if err := json.Unmarshal(out, &mf); err != nil {
		t.Fatal(err)
	}
	var deps []string
	for _, r := range mf.Require {
		if !r.Indirect {
			deps = append(deps, r.Path)
		}
	}
	return deps
}

var depRow = regexp.MustCompile(`^\|\s*([^|\s]+)\s*\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|$`)

// listedDeps reads DEPENDENCIES.md's table: module -> why.
func listedDeps(text string) (map[string]string, error) {
	_, rest, ok := strings.Cut(text, "<!-- deps:start -->")
	if !ok {
		return nil, os.ErrNotExist
	}
	body, _, ok := strings.Cut(rest, "<!-- deps:end -->")
	if !ok {
		return nil, os.ErrNotExist
	}
	listed := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		m := depRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || m[1] == "module" || strings.HasPrefix(m[1], "---") {
			continue
		}
		listed[m[1]] = m[3]
	}
	return listed, nil
}

// TestDependencyBudget: every direct dependency of go.mod is in
// DEPENDENCIES.md with a reason, and nothing listed there is gone.
func TestDependencyBudget(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "DEPENDENCIES.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := listedDeps(string(b))
	if err != nil {
		t.Fatal("DEPENDENCIES.md has no <!-- deps:start --> … <!-- deps:end --> table")
	}
	deps := directDeps(t, root)
	if len(deps) == 0 {
		t.Fatal("go.mod has no direct dependency: the reader is broken")
	}
	inMod := map[string]bool{}
	for _, d := range deps {
		inMod[d] = true
		why, ok := listed[d]
		switch {
		case !ok:
			t.Errorf("go.mod requires %s directly, but DEPENDENCIES.md does not list it: add a row saying why it is needed (or drop it)", d)
		case len(strings.Fields(why)) < 4:
			t.Errorf("DEPENDENCIES.md: %s: the reason %q is too short to review", d, why)
		}
	}
	for d := range listed {
		if !inMod[d] {
			t.Errorf("DEPENDENCIES.md lists %s, which go.mod no longer requires directly: remove the row", d)
		}
	}
}

func TestListedDeps(t *testing.T) {
	text := "x\n<!-- deps:start -->\n| module | used by | why |\n|---|---|---|\n| a.example/m | pkg | does a thing well |\n| b.example/n | pkg |  |\n<!-- deps:end -->\n| c.example/o | p | outside the table |\n"
	got, err := listedDeps(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["a.example/m"] != "does a thing well" || got["b.example/n"] != "" {
		t.Fatalf("got %q", got)
	}
	if _, err := listedDeps("no markers"); err == nil {
		t.Fatal("a file without markers parsed")
	}
}
