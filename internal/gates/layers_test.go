package gates

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// folderOf is the layer a package belongs to: internal/X for everything
// under internal/X (its subpackages stand with it), else the first
// directory of the path (cmd, bench).
func folderOf(rel string) string {
	parts := strings.Split(rel, "/")
	if parts[0] == "internal" && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// folderCycle returns a cycle of folders (first == last) in the graph,
// or nil. edges maps a folder to the folders it imports.
func folderCycle(edges map[string]map[string]string) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(f string) []string
	visit = func(f string) []string {
		state[f] = open
		stack = append(stack, f)
		tos := make([]string, 0, len(edges[f]))
		for to := range edges[f] {
			tos = append(tos, to)
		}
		slices.Sort(tos)
		for _, to := range tos {
			switch state[to] {
			case open:
				i := slices.Index(stack, to)
				return append(slices.Clone(stack[i:]), to)
			case unseen:
				if c := visit(to); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[f] = done
		return nil
	}
	froms := make([]string, 0, len(edges))
	for f := range edges {
		froms = append(froms, f)
	}
	slices.Sort(froms)
	for _, f := range froms {
		if state[f] == unseen {
			if c := visit(f); c != nil {
				return c
			}
		}
	}
	return nil
}

// TestFolderCycle: the cycle finder finds a loop through three folders
// and none in a layered graph.
func TestFolderCycle(t *testing.T) {
	tests := []struct {
		name  string
		edges map[string]map[string]string
		cycle bool
	}{
		{"layered", map[string]map[string]string{"a": {"b": "", "c": ""}, "b": {"c": ""}}, false},
		{"three-folder loop", map[string]map[string]string{"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}}, true},
		{"adapter inside the low folder", map[string]map[string]string{"internal/dispatch": {"internal/audit": ""}, "internal/audit": {"internal/dispatch": ""}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := folderCycle(tt.edges)
			if (c != nil) != tt.cycle {
				t.Fatalf("cycle = %v, want one: %v", c, tt.cycle)
			}
			if c != nil && c[0] != c[len(c)-1] {
				t.Fatalf("cycle %v does not close", c)
			}
		})
	}
}

// TestNoImportOfAHigherLayer: the repository's folders (internal/X with
// its subpackages, cmd, bench) form layers: no folder's production code
// imports a folder that imports it back, however indirectly. An adapter
// that teaches a low package to the dispatcher lives above both (e.g.
// dispatch/audittools), never inside the low package's folder, or the
// low folder would stand above the dispatcher that imports it.
func TestNoImportOfAHigherLayer(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/sandhold/sandhold/"
	edges := map[string]map[string]string{} // from folder -> to folder -> one import that makes the arrow
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		n++
		for _, imp := range fields[1:] {
			to, ok := strings.CutPrefix(imp, module)
			if !ok || folderOf(to) == folderOf(from) {
				continue
			}
			if edges[folderOf(from)] == nil {
				edges[folderOf(from)] = map[string]string{}
			}
			if _, seen := edges[folderOf(from)][folderOf(to)]; !seen {
				edges[folderOf(from)][folderOf(to)] = from + " imports " + to
			}
		}
	}
	if n < 40 {
		t.Fatalf("go list named %d packages of the module: the reader is broken", n)
	}
	if c := folderCycle(edges); c != nil {
		var why []string
		for i := 0; i+1 < len(c); i++ {
			why = append(why, edges[c[i]][c[i+1]])
		}
		t.Fatalf("folders import each other: %s\n%s", strings.Join(c, " -> "), strings.Join(why, "\n"))
	}
}

// apiLevels are internal/api's packages from the bottom up: the server
// (middleware, envelope, native routes), then the packages that mount
// routes on it, side by side — the AIO edge and the relays — and the test
// support that builds a server. A package imports only packages of a lower
// level, never one beside it; every package under internal/api has its
// place here, so a new one is placed on purpose.
var apiLevels = [][]string{
	{"internal/api"},
	{"internal/api/aio", "internal/api/relay", "internal/api/apitest"},
}

// TestAPIPackagesAreLayered: internal/api's packages import each other
// only downwards (apiLevels), so the server core knows neither the AIO
// table nor the relays (it reads the table through api.Table).
func TestAPIPackagesAreLayered(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./internal/api/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/sandhold/sandhold/"
	level := map[string]int{}
	for i, l := range apiLevels {
		for _, p := range l {
			level[p] = i
		}
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from := strings.TrimPrefix(fields[0], module)
		lf, ok := level[from]
		if !ok {
			t.Errorf("%s has no level in apiLevels: place it", from)
			continue
		}
		n++
		for _, imp := range fields[1:] {
			to, ok := strings.CutPrefix(imp, module)
			if !ok || folderOf(to) != "internal/api" {
				continue
			}
			if lt, ok := level[to]; !ok || lt >= lf {
				t.Errorf("%s imports %s, which is not below it (apiLevels)", from, to)
			}
		}
	}
	if n < 3 {
		t.Fatalf("go list named %d packages under internal/api: the reader is broken", n)
	}
}
