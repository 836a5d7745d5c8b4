package gates

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notOn are argument structs whose sandbox field is not the sandbox the
// call acts on, so it is not a dispatch.On, each with its reason.
var notOn = map[string]string{
	"internal/audit.QueryArgs": "a filter (the records about this sandbox), not the sandbox audit.query acts on; audit stands below the dispatcher",
}

// typeKey names a type by its package directory and name.
type typeKey struct{ dir, name string }

func (k typeKey) String() string { return k.dir + "." + k.name }

// structDecl is a struct type declaration and the imports of its file.
type structDecl struct {
	st      *ast.StructType
	imports map[string]string // import name -> package directory
	pos     token.Pos
}

// argStructs holds what onArgsProblems reads: every struct declared in
// the parsed files and every type named as a tool's arguments.
type argStructs struct {
	module  string
	fset    *token.FileSet
	structs map[typeKey]structDecl
	args    map[typeKey]token.Pos
	inline  []*ast.StructType // dispatch.Ref[struct{…}, R]
	inlinef []map[string]string
}

// readArgStructs indexes files (relative path -> parsed file) of module.
func readArgStructs(module string, fset *token.FileSet, files map[string]*ast.File) *argStructs {
	a := &argStructs{module: module, fset: fset, structs: map[typeKey]structDecl{}, args: map[typeKey]token.Pos{}}
	for rel, f := range files {
		dir := path.Dir(rel)
		imports := map[string]string{}
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				continue
			}
			local, ok := strings.CutPrefix(p, module+"/")
			if !ok {
				continue
			}
			name := path.Base(local)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = local
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok {
					a.structs[typeKey{dir, ts.Name.Name}] = structDecl{st: st, imports: imports, pos: ts.Pos()}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ix, ok := n.(*ast.IndexListExpr)
			if !ok || len(ix.Indices) != 2 || !isRef(ix.X, dir) {
				return true
			}
			arg := ix.Indices[0]
			if st, ok := arg.(*ast.StructType); ok {
				a.inline = append(a.inline, st)
				a.inlinef = append(a.inlinef, imports)
			} else if k, ok := resolveType(arg, dir, imports); ok {
				if _, seen := a.args[k]; !seen {
					a.args[k] = ix.Pos()
				}
			}
			return true
		})
	}
	return a
}

// isRef reports whether e names dispatch.Ref (Ref inside dispatch).
func isRef(e ast.Expr, dir string) bool {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		return isIdent(sel.X, "dispatch") && sel.Sel.Name == "Ref"
	}
	return dir == "internal/dispatch" && isIdent(e, "Ref")
}

// resolveType names the declared type e stands for in a file of dir.
func resolveType(e ast.Expr, dir string, imports map[string]string) (typeKey, bool) {
	switch t := e.(type) {
	case *ast.StarExpr:
		return resolveType(t.X, dir, imports)
	case *ast.IndexExpr:
		return resolveType(t.X, dir, imports)
	case *ast.IndexListExpr:
		return resolveType(t.X, dir, imports)
	case *ast.Ident:
		return typeKey{dir, t.Name}, true
	case *ast.SelectorExpr:
		if pkg, ok := t.X.(*ast.Ident); ok && imports[pkg.Name] != "" {
			return typeKey{imports[pkg.Name], t.Sel.Name}, true
		}
	}
	return typeKey{}, false
}

var onKey = typeKey{"internal/dispatch", "On"}

// problems lists the argument structs that name a sandbox by a field of
// their own (Go name Sandbox or JSON name sandbox) instead of embedding
// dispatch.On, following embedded structs; and how many argument structs
// it read and how many of them reach dispatch.On.
func (a *argStructs) problems() (problems []string, structs, on int) {
	var walk func(st *ast.StructType, dir string, imports map[string]string, owner string, seen map[typeKey]bool) bool
	walk = func(st *ast.StructType, dir string, imports map[string]string, owner string, seen map[typeKey]bool) bool {
		hasOn := false
		for _, f := range st.Fields.List {
			if len(f.Names) == 0 {
				k, ok := resolveType(f.Type, dir, imports)
				if !ok {
					continue
				}
				if k == onKey {
					hasOn = true
					continue
				}
				if d, ok := a.structs[k]; ok && !seen[k] {
					seen[k] = true
					if walk(d.st, k.dir, d.imports, owner+" (embedding "+k.String()+")", seen) {
						hasOn = true
					}
				}
				continue
			}
			for _, n := range f.Names {
				jsonName := n.Name
				if f.Tag != nil {
					if tag, err := strconv.Unquote(f.Tag.Value); err == nil {
						if j, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ","); j != "" {
							jsonName = j
						}
					}
				}
				// Any case: encoding/json matches a key to a field
				// whatever its case.
				if strings.EqualFold(n.Name, "Sandbox") || strings.EqualFold(jsonName, "sandbox") {
					problems = append(problems, owner+": field "+n.Name+" names the sandbox; embed dispatch.On instead")
				}
			}
		}
		return hasOn
	}
	keys := make([]typeKey, 0, len(a.args))
	for k := range a.args {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y typeKey) int { return strings.Compare(x.String(), y.String()) })
	for _, k := range keys {
		d, ok := a.structs[k]
		if !ok {
			continue // not a struct (a type parameter, a map, a builtin)
		}
		structs++
		if notOn[k.String()] != "" {
			continue
		}
		if walk(d.st, k.dir, d.imports, a.fset.Position(d.pos).String()+" "+k.String(), map[typeKey]bool{k: true}) {
			on++
		}
	}
	for i, st := range a.inline {
		structs++
		if walk(st, "", a.inlinef[i], a.fset.Position(st.Pos()).String()+" inline arguments", map[typeKey]bool{}) {
			on++
		}
	}
	return problems, structs, on
}

// TestArgumentsEmbedOn: every tool's argument struct (the A of a
// dispatch.Ref[A, R]) that names the sandbox it acts on does so by
// embedding dispatch.On, never by a Sandbox field of its own, so every
// edge names a call's sandbox the one way (On.Target) and the field's
// JSON name, tag and description are the same for every tool.
func TestArgumentsEmbedOn(t *testing.T) {
	files, fset := parseProduction(t, "")
	a := readArgStructs("github.com/sandhold/sandhold", fset, files)
	problems, structs, on := a.problems()
	for _, p := range problems {
		t.Error(p)
	}
	// The reader must find the tools' arguments, or the check is empty.
	if structs < 100 || on < 60 {
		t.Fatalf("read %d argument structs, %d embedding dispatch.On: the reader is broken", structs, on)
	}
	t.Logf("%d argument structs, %d embed dispatch.On", structs, on)
}

// TestOnArgsProblems: the checker flags a field of its own, under either
// name and through an embedded struct, and accepts dispatch.On.
func TestOnArgsProblems(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		problems int
		on       int
	}{
		{"embeds On", `type A struct { dispatch.On; Path string }`, 0, 1},
		{"own Sandbox field", `type A struct { Sandbox string ` + "`json:\"sandbox,omitempty\"`" + ` }`, 1, 0},
		{"own field under another Go name", `type A struct { ID string ` + "`json:\"sandbox\"`" + ` }`, 1, 0},
		{"own field in another case", `type A struct { SandBox string }`, 1, 0},
		{"own JSON name in another case", `type A struct { ID string ` + "`json:\"Sandbox\"`" + ` }`, 1, 0},
		{"through an embedded struct", `type B struct { Sandbox string }; type A struct { B; N int }`, 1, 0},
		{"On through an embedded struct", `type B struct { dispatch.On }; type A struct { *B; N int }`, 0, 1},
		{"no sandbox at all", `type A struct { Name string }`, 0, 0},
		{"inline arguments", ``, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package p\nimport \"github.com/sandhold/sandhold/internal/dispatch\"\n" + tt.src + "\n"
			if tt.src == "" {
				src += "var R = dispatch.Ref[struct{ Sandbox string }, int](\"x\")\n"
			} else {
				src += "var R = dispatch.Ref[A, int](\"x\")\n"
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "internal/p/p.go", src, 0)
			if err != nil {
				t.Fatal(err)
			}
			a := readArgStructs("github.com/sandhold/sandhold", fset, map[string]*ast.File{"internal/p/p.go": f})
			problems, structs, on := a.problems()
			if len(problems) != tt.problems || on != tt.on || structs != 1 {
				t.Fatalf("problems %q, %d structs, %d on; want %d problems, 1 struct, %d on", problems, structs, on, tt.problems, tt.on)
			}
		})
	}
}
