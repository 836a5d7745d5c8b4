package sandboxinit

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostCgroupPath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		bad  bool
	}{
		{"0::/\n", "", false},
		{"4:memory:/\n1:cpu,cpuacct:/\n0::/\n", "", false},
		{"4:memory:/sandhold/sb1\n0::/\n", "/sandhold/sb1", true},
		{"0::/a:b\n", "/a:b", true},
		{"garbage\n", "garbage", true},
	} {
		got, bad := hostCgroupPath(tc.in)
		if got != tc.want || bad != tc.bad {
			t.Errorf("hostCgroupPath(%q) = %q, %v; want %q, %v", tc.in, got, bad, tc.want, tc.bad)
		}
	}
}

// TestInitOpensNothingInheritable: a command forked while another request
// holds a descriptor inherits it unless it is close-on-exec, so the init's
// code never makes an inheritable one. It reads the package's source (and
// the launcher's, which shares the init's program): the
// calls that always make one (dup, pipe, accept, inotify_init,
// epoll_create) are refused, and socket/open calls must name CLOEXEC.
func TestInitOpensNothingInheritable(t *testing.T) {
	always := map[string]bool{"Dup": true, "Dup2": true, "Pipe": true, "Accept": true, "InotifyInit": true, "EpollCreate": true}
	flagged := map[string]int{"Socket": 1, "Socketpair": 1, "Open": 1, "Openat": 2} // argument index holding the flags
	fset := token.NewFileSet()
	var names []string
	// The init's code, and what it shares with the launcher.
	for _, glob := range []string{"*.go", "../launcher/*.go", "../fds/*.go"} {
		got, err := filepath.Glob(glob)
		if err != nil || len(got) == 0 {
			t.Fatalf("list the sources %s: %v", glob, err)
		}
		names = append(names, got...)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		{
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				id, ok := sel.X.(*ast.Ident)
				if !ok || (id.Name != "unix" && id.Name != "syscall") {
					return true
				}
				pos := fset.Position(call.Pos())
				if always[sel.Sel.Name] {
					t.Errorf("%s:%d: %s.%s makes an inheritable descriptor (use the CLOEXEC variant: F_DUPFD_CLOEXEC, Pipe2, Accept4 …)", name, pos.Line, id.Name, sel.Sel.Name)
				}
				if i, ok := flagged[sel.Sel.Name]; ok && i < len(call.Args) {
					var b strings.Builder
					_ = printer.Fprint(&b, fset, call.Args[i])
					if !strings.Contains(b.String(), "CLOEXEC") {
						t.Errorf("%s:%d: %s.%s without CLOEXEC in %s", name, pos.Line, id.Name, sel.Sel.Name, b.String())
					}
				}
				return true
			})
		}
	}
}
