package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeanInitLinksNoSeccompCompiler: the lean init installs the seccomp
// program compiled at build time (package seccomp/compiled) and must not
// link the compiler's library, whose package initialisation keeps 190-260
// kB in every process that links it.
func TestLeanInitLinksNoSeccompCompiler(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH:", err)
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/sandhold/sandhold/cmd/sandhold-init").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "github.com/elastic/go-seccomp-bpf", "github.com/elastic/go-seccomp-bpf/arch",
			"golang.org/x/net/bpf", "github.com/sandhold/sandhold/internal/isolate/seccomp":
			t.Errorf("cmd/sandhold-init links %s", pkg)
		}
	}
}
