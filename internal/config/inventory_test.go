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
	root := repoRoot(t)
	used := usedNames(t, root)
	rows := documented(t, root)
	if len(rows) == 0 {
		t.Fatal("no inventory rows between the markers in SECURITY.md")
	}
	covers := func(r inventoryRow, name string) bool {
		if r.match == "prefix" {
			return strings.HasPrefix(name, strings.TrimSuffix(r.name, "*"))
		}
		return r.name == name
	}
	for _, r := range rows {
		if !slices.Contains([]string{"security", "operational", "internal"}, r.class) {
			t.Errorf("%s: class %q, want security, operational or internal", r.name, r.class)
		}
		if r.match != "exact" && r.match != "prefix" {
			t.Errorf("%s: match %q, want exact or prefix", r.name, r.match)
		}
		found := false
		for name := range used {
			if covers(r, name) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s is documented in SECURITY.md but no code uses it", r.name)
		}
	}
	for name, where := range used {
		if !slices.ContainsFunc(rows, func(r inventoryRow) bool { return covers(r, name) }) {
			t.Errorf("%s is used at %s but missing from SECURITY.md's inventory", name, where)
		}
	}
	// Every setting in the config table is documented (a stricter check
	// than "used", since the table is where names are declared).
	for _, s := range settings {
		if !slices.ContainsFunc(rows, func(r inventoryRow) bool { return covers(r, s.env) }) {
			t.Errorf("config setting %s is not in the inventory", s.env)
		}
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
