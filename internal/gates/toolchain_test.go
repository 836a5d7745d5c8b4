package gates

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMakeUsesThePinnedToolchain: every make target (and so `make run`,
// `make test` and CI's .ci/run) runs the go command as the toolchain
// go.mod pins, even on a machine whose go.env says GOTOOLCHAIN=local, as
// this project's do: an older Go carries standard-library vulnerabilities
// (SECURITY.md, "Known vulnerabilities").
func TestMakeUsesThePinnedToolchain(t *testing.T) {
	if testing.Short() {
		t.Skip("may fetch the pinned toolchain from the module proxy")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not found on this host")
	}
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mf struct{ Toolchain string }
	if err := json.Unmarshal(out, &mf); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(mf.Toolchain, "go1.") {
		t.Fatalf("go.mod pins no toolchain (toolchain line %q); want `toolchain go1.N.P`", mf.Toolchain)
	}
	// A rule defined on the command line runs with the Makefile's
	// variables and exports, as every target does.
	make := exec.Command("make", "-s", "--no-print-directory", "-C", root,
		"--eval", "gates-go-version: ; @$(GO) env GOVERSION", "gates-go-version")
	// Under `make test -j2` this test's environment carries the outer
	// make's jobserver flags; the inner make is a separate run.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			make.Env = append(make.Env, kv)
		}
	}
	make.Env = append(make.Env, "GOTOOLCHAIN=local")
	var stderr strings.Builder
	make.Stderr = &stderr
	got, err := make.Output()
	if err != nil {
		t.Fatalf("make: %v\n%s%s", err, got, stderr.String())
	}
	if v := strings.TrimSpace(string(got)); v != mf.Toolchain {
		t.Fatalf("make runs %q with GOTOOLCHAIN=local in the environment; want go.mod's %s", v, mf.Toolchain)
	}
}
