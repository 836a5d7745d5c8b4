package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notGates are require* helpers that gate on nothing of the host, each
// with its reason; every other one must honour -short.
var notGates = map[string]string{
	"requireAMD64":       "an architecture check: the policy's golden test reads no host state",
	"requireOwnOwners":   "an assertion about sandboxes the test made, not a gate",
	"requireToolFailure": "an assertion about an answer, not a gate",
}

// gateFuncs are gates not named require*: the helpers that start
// PostgreSQL and Chromium for many packages' tests.
var gateFuncs = map[string]string{
	"internal/store/pgtest/pgtest.go:Shared":                      "starts PostgreSQL",
	"internal/browser/cdp/cdptest/chromium.go:Start":              "starts Chromium",
	"internal/template/templatetest/templatetest.go:DebianPython": "builds a Debian root",
}

// TestEveryGateHonoursShort reads the module's Go files: every function
// named require*/Require* whose first parameter is a *testing.T or
// testing.TB, and every helper in gateFuncs, must call SkipShort (through
// testenv), RequireSandboxes, or another gate, so `go test -short` starts
// no sandbox, browser or PostgreSQL.
func TestEveryGateHonoursShort(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	gates, failed, found := 0, 0, map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git", ".tools", "web":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Recv != nil {
				continue
			}
			name := fn.Name.Name
			key := filepath.ToSlash(rel) + ":" + name
			_, listed := gateFuncs[key]
			if !listed && (!isGateName(name) || !takesT(fn)) {
				continue
			}
			found[key] = true
			if reason, ok := notGates[name]; ok && !listed {
				t.Logf("%s: not a gate (%s)", key, reason)
				continue
			}
			gates++
			if !callsGate(fn.Body) {
				failed++
				t.Errorf("%s is a test gate that does not honour -short: call testenv.SkipShort(t, \"starts …\") first", key)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range gateFuncs {
		if !found[key] {
			t.Errorf("%s (gateFuncs) no longer exists: update the list", key)
		}
	}
	if gates < 15 {
		t.Fatalf("only %d gates found: the walk missed the module", gates)
	}
	t.Logf("%d gates, %d honour -short", gates, gates-failed)
}

func isGateName(n string) bool {
	for _, p := range []string{"require", "Require"} {
		if rest, ok := strings.CutPrefix(n, p); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			return true
		}
	}
	return false
}

// takesT says whether fn's first parameter is *testing.T or testing.TB.
func takesT(fn *ast.FuncDecl) bool {
	ps := fn.Type.Params.List
	if len(ps) == 0 {
		return false
	}
	typ := ps[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	sel, ok := typ.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "testing" && (sel.Sel.Name == "T" || sel.Sel.Name == "TB")
}

// callsGate says whether body calls SkipShort or another gate.
func callsGate(body *ast.BlockStmt) bool {
	ok := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, isCall := n.(*ast.CallExpr)
		if !isCall {
			return !ok
		}
		var name string
		switch f := call.Fun.(type) {
		case *ast.Ident:
			name = f.Name
		case *ast.SelectorExpr:
			name = f.Sel.Name
		}
		if _, exempt := notGates[name]; name == "SkipShort" || (isGateName(name) && !exempt) {
			ok = true
		}
		return !ok
	})
	return ok
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for range 32 { // bounds the walk up
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		dir = filepath.Dir(dir)
	}
	t.Fatal("no go.mod above the working directory")
	return ""
}
