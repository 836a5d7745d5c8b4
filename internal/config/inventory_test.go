package config

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// envName finds SANDBOX_* names inside string literals.
var envName = regexp.MustCompile(`SANDBOX_[A-Z0-9_]*[A-Z0-9]`)

// repoRoot walks up from the package dir to the directory holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// usedNames parses every non-test .go file under root and returns the
// SANDBOX_* names in its string literals, with one place each was seen.
func usedNames(t *testing.T, root string) map[string]string {
	t.Helper()
	used := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				s = lit.Value
			}
			for _, m := range envName.FindAllString(s, -1) {
				if _, seen := used[m]; !seen {
					rel, _ := filepath.Rel(root, path)
					used[m] = rel + ":" + strconv.Itoa(fset.Position(lit.Pos()).Line)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

type inventoryRow struct {
	name, class, match string
}

// documented reads the table between the inventory markers of SECURITY.md.
func documented(t *testing.T, root string) []inventoryRow {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var rows []inventoryRow
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "<!-- env-inventory:start -->":
			in = true
			continue
		case "<!-- env-inventory:end -->":
			in = false
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 {
			t.Fatalf("inventory row with %d cells: %q", len(cells), line)
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if name == "name" || strings.HasPrefix(name, "---") {
			continue
		}
		rows = append(rows, inventoryRow{name: name, class: strings.TrimSpace(cells[1]), match: strings.TrimSpace(cells[2])})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestEnvInventory(t *testing.T) {
	for _, p := range inventoryProblems(t, repoRoot(t), true) {
		t.Error(p)
	}
}

// inventoryProblems compares the names used under root with SECURITY.md's
// table. withSettings also requires every config setting to be listed.
func inventoryProblems(t *testing.T, root string, withSettings bool) []string {
	t.Helper()
	used := usedNames(t, root)
	rows := documented(t, root)
	if len(rows) == 0 {
		return []string{"no inventory rows between the markers in SECURITY.md"}
	}
	var problems []string
	covers := func(r inventoryRow, name string) bool {
		if r.match == "prefix" {
			return strings.HasPrefix(name, strings.TrimSuffix(r.name, "*"))
		}
		return r.name == name
	}
	for _, r := range rows {
		if !slices.Contains([]string{"security", "operational", "internal"}, r.class) {
			problems = append(problems, r.name+": class "+strconv.Quote(r.class)+", want security, operational or internal")
		}
		if r.match != "exact" && r.match != "prefix" {
			problems = append(problems, r.name+": match "+strconv.Quote(r.match)+", want exact or prefix")
		}
		found := false
		for name := range used {
			if covers(r, name) {
				found = true
				break
			}
		}
		if !found {
			problems = append(problems, r.name+" is documented in SECURITY.md but no code uses it")
		}
	}
	for name, where := range used {
		if !slices.ContainsFunc(rows, func(r inventoryRow) bool { return covers(r, name) }) {
			problems = append(problems, name+" is used at "+where+" but missing from SECURITY.md's inventory")
		}
	}
	if withSettings {
		// Every setting in the config table is documented (the table is
		// where names are declared).
		for _, s := range settings {
			if !slices.ContainsFunc(rows, func(r inventoryRow) bool { return covers(r, s.env) }) {
				problems = append(problems, "config setting "+s.env+" is not in the inventory")
			}
		}
	}
	slices.Sort(problems)
	return problems
}

func TestInventoryCatchesDrift(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":          "module example.com/x\n",
		"a/a.go":          "package a\n\nconst x = \"SANDBOX_USED_ONLY\"\nconst y = \"see SANDBOX_BOTH for details\"\nconst z = \"SANDBOX_PLUGIN_FOO\"\n",
		"a/a_test.go":     "package a\n\nconst t = \"SANDBOX_IN_TEST_ONLY\"\n",
		".hidden/h.go":    "package h\n\nconst h = \"SANDBOX_HIDDEN\"\n",
		"a/testdata/t.go": "package t\n\nconst h = \"SANDBOX_FIXTURE\"\n",
		"SECURITY.md": "x\n<!-- env-inventory:start -->\n| name | class | match | effect |\n|---|---|---|---|\n" +
			"| SANDBOX_BOTH | security | exact | e |\n| SANDBOX_DOC_ONLY | operational | exact | e |\n" +
			"| SANDBOX_PLUGIN_* | internal | prefix | e |\n| SANDBOX_ODD | weird | fuzzy | e |\n<!-- env-inventory:end -->\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := inventoryProblems(t, root, false)
	want := []string{
		"SANDBOX_DOC_ONLY is documented in SECURITY.md but no code uses it",
		"SANDBOX_ODD is documented in SECURITY.md but no code uses it",
		"SANDBOX_ODD: class \"weird\", want security, operational or internal",
		"SANDBOX_ODD: match \"fuzzy\", want exact or prefix",
		"SANDBOX_USED_ONLY is used at a/a.go:3 but missing from SECURITY.md's inventory",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestInventoryScannerFindsNames(t *testing.T) {
	// Guard against a scanner that silently finds nothing.
	used := usedNames(t, repoRoot(t))
	for _, want := range []string{"SANDBOX_LISTEN", "SANDBOX_API_KEY", "SANDBOX_MAX_BODY"} {
		if _, ok := used[want]; !ok {
			t.Errorf("scanner missed %s", want)
		}
	}
}
