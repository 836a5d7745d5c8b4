package gates

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"
)

// parseProduction parses the repository's non-test Go files under dir
// (relative, slash-separated; "" is everything).
func parseProduction(t *testing.T, dir string) (map[string]*ast.File, *token.FileSet) {
	t.Helper()
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	files, err := GoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]*ast.File{}
	for _, rel := range files {
		if strings.HasSuffix(rel, "_test.go") || !strings.HasPrefix(rel, dir) {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = f
	}
	return out, fset
}

// TestToolsAreCalledByRef: code calls a tool through its dispatch.Ref
// (ref.Call), so a call whose arguments or answer do not match the tool
// does not compile. Dispatcher.Dispatch(ctx, caller, name, args) is the
// dispatcher's own business (internal/dispatch); JSON edges use
// Dispatcher.Call with raw arguments.
func TestToolsAreCalledByRef(t *testing.T) {
	files, fset := parseProduction(t, "")
	for rel, f := range files {
		if strings.HasPrefix(rel, "internal/dispatch/") {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Dispatch" && len(call.Args) == 4 {
				t.Errorf("%s: a tool dispatched by name; call its dispatch.Ref instead (ref.Call)", fset.Position(call.Pos()))
			}
			return true
		})
	}
}

// TestAIORowsAreTyped: no adapter in internal/api answers (any, error):
// an AIO row's adapters take and give its tool's own types (jsonRowAs
// takes a dispatch.Ref[A, R]), so a row that does not match its tool
// does not compile.
func TestAIORowsAreTyped(t *testing.T) {
	files, fset := parseProduction(t, "internal/api/")
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ft, ok := n.(*ast.FuncType)
			if !ok || ft.Results == nil || len(ft.Results.List) != 2 {
				return true
			}
			if isAny(ft.Results.List[0].Type) && isIdent(ft.Results.List[1].Type, "error") {
				t.Errorf("%s: a function answering (any, error) in internal/api; give it the tool's argument type", fset.Position(ft.Pos()))
			}
			return true
		})
	}
	// Nor is an adapter instantiated with any: same[struct{}, any] would
	// pass any tool's answer through unchecked. (reqType only documents a
	// request body: the MCP call row's is the called tool's arguments, a
	// JSON edge by nature, like /v1/tools/call.)
	aio, aioSet := parseProduction(t, "internal/api/aio/")
	for _, f := range aio {
		ast.Inspect(f, func(n ast.Node) bool {
			var args []ast.Expr
			switch x := n.(type) {
			case *ast.IndexExpr:
				if isIdent(x.X, "reqType") {
					return true
				}
				args = []ast.Expr{x.Index}
			case *ast.IndexListExpr:
				args = x.Indices
			}
			for _, a := range args {
				if isAny(a) || isMapOfAny(a) || isSliceOf(a, isMapOfAny) {
					t.Errorf("%s: an AIO adapter instantiated with %s; give it the tool's answer type", aioSet.Position(a.Pos()), types.ExprString(a))
				}
			}
			return true
		})
	}
}

func isSliceOf(e ast.Expr, elem func(ast.Expr) bool) bool {
	a, ok := e.(*ast.ArrayType)
	return ok && a.Len == nil && (elem(a.Elt) || isAny(a.Elt))
}

func isMapOfAny(e ast.Expr) bool {
	m, ok := e.(*ast.MapType)
	return ok && isAny(m.Value)
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func isAny(e ast.Expr) bool {
	if isIdent(e, "any") {
		return true
	}
	it, ok := e.(*ast.InterfaceType)
	return ok && len(it.Methods.List) == 0
}
