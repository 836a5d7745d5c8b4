// Package release builds, describes and verifies sandhold release
// artifacts: reproducible static binaries, SBOMs, SHA256SUMS and a
// signature over the sums.
//
// What it stops: a release whose bytes cannot be tied back to a source
// commit (a tampered binary, a swapped artifact, an SBOM that does not
// describe what was shipped, a binary built from another commit). It does
// not stop a compromised build machine from producing a consistent,
// signed, malicious release: reproducibility is the defence there — anyone
// can rebuild from the commit and compare bytes.
package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Arches are the platforms a release ships.
var Arches = []string{"amd64", "arm64"}

// BuildOptions says what to build and what to stamp into it.
type BuildOptions struct {
	SrcDir  string // module root
	Out     string // output file
	Arch    string // GOARCH (GOOS is always linux)
	Version string
	Commit  string // full commit id
	Go      string // the go command; "go" when empty
	// LeanInit embeds the lean init (cmd/sandhold-init), built first for
	// the same arch; Build sets it when the module has that program.
	LeanInit bool
}

var (
	// versionRe bounds what a version stamp may be: it lands in -ldflags
	// and in file names.
	versionRe = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)
	// commitRe: a full SHA-1 or SHA-256 object name.
	commitRe = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
	// toolchainRe bounds a toolchain name from go.mod before it becomes
	// GOTOOLCHAIN: a Go release (go1.27.3, go1.28rc1), nothing else.
	toolchainRe = regexp.MustCompile(`^go1\.[0-9]+(\.[0-9]+|(rc|beta)[0-9]+)$`)
	// goLineRe: a go line that names a release (1.26.8), not only a
	// language version (1.26), so it can stand for a toolchain.
	goLineRe = regexp.MustCompile(`^1\.[0-9]+\.[0-9]+$`)
)

// Toolchain is the Go toolchain the module at dir pins, which its
// release binaries are built with whatever the caller's GOTOOLCHAIN says
// (a machine's GOTOOLCHAIN=local would otherwise build with whatever Go
// is installed, with its standard-library vulnerabilities): go.mod's
// toolchain line, else its go line when that names a release. "" when
// it pins none (`toolchain default`, or `go 1.26`); the caller's Go
// builds then.
func Toolchain(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod")) // #nosec G304 -- the module root the release is built from
	if err != nil {
		return "", err
	}
	var tc, goLine string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		switch f := strings.Fields(line); {
		case len(f) == 2 && f[0] == "toolchain":
			tc = f[1]
		case len(f) == 2 && f[0] == "go":
			goLine = f[1]
		}
	}
	switch {
	case tc == "default":
		return "", nil
	case tc != "":
		if !toolchainRe.MatchString(tc) {
			return "", fmt.Errorf("go.mod: toolchain %q: want a Go release such as go1.27.3", tc)
		}
		return tc, nil
	case goLineRe.MatchString(goLine):
		return "go" + goLine, nil
	}
	return "", nil
}

// ValidateStamp checks a version and commit before they reach a linker
// flag or a file name.
func ValidateStamp(version, commit string) error {
	if !versionRe.MatchString(version) {
		return fmt.Errorf("version %q: want letters, digits and .+_- only", version)
	}
	if !commitRe.MatchString(commit) {
		return fmt.Errorf("commit %q: want a full hexadecimal object name", commit)
	}
	return nil
}

// LDFlags are the linker flags of a release build: no symbol table or
// DWARF, an empty build id (the default one hashes inputs that include
// the toolchain's own path), and the version and commit stamps.
func LDFlags(version, commit string) string {
	return fmt.Sprintf("-s -w -buildid= -X main.version=%s -X main.commit=%s", version, commit)
}

// leanInitPkg is the in-sandbox init's own program; a module that has it
// ships it embedded (`-tags leaninit`), as `make build` does, with the
// extractor the init runs for each extract or pack (archivePkg) beside it.
const (
	leanInitPkg = "./cmd/sandhold-init"
	leanInitOut = "internal/agent/initbin/sandhold-init"
	archivePkg  = "./cmd/sandhold-archive"
	archiveOut  = "internal/agent/initbin/sandhold-archive"
)

// initArgs is the go command line that builds the lean init for the
// server to embed: the same reproducibility flags, no stamps. On amd64
// its entry point is the keeper an idle init sleeps in, as in `make
// build` (cmd/sandhold-init/keeper_amd64.s).
func initArgs(arch string) []string {
	ld := "-s -w -buildid="
	if arch == "amd64" {
		ld += " -E main.keeperEntry"
	}
	return []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ld, "-o", leanInitOut, leanInitPkg}
}

// archiveArgs builds the extractor the same way.
func archiveArgs() []string {
	return []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid=", "-o", archiveOut, archivePkg}
}

// HasLeanInit says whether the module at dir has the lean init program.
func HasLeanInit(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, leanInitPkg))
	return err == nil && st.IsDir()
}

// BuildArgs is the exact go command line of a release build.
// -trimpath removes the build machine's paths; -buildvcs=false keeps the
// VCS state (which differs between a clone and an unpacked source
// tarball) out of the binary — the commit is stamped explicitly instead.
func BuildArgs(o BuildOptions) []string {
	args := []string{"build", "-trimpath", "-buildvcs=false"}
	if o.LeanInit {
		args = append(args, "-tags", "leaninit")
	}
	return append(args, "-ldflags", LDFlags(o.Version, o.Commit), "-o", o.Out, "./cmd/sandhold")
}

// BuildEnv is the environment of a release build: the caller's (for
// GOCACHE, GOPATH, GOPROXY), with the target and cgo fixed and flags from
// the environment removed so they cannot change the bytes; and, when the
// module pins a toolchain (Toolchain), GOTOOLCHAIN set to it, so the go
// command fetches and runs that exact release.
func BuildEnv(base []string, arch, toolchain string) []string {
	env := make([]string, 0, len(base)+5)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CGO_ENABLED", "GOOS", "GOARCH", "GOFLAGS", "GOAMD64", "GOARM64", "GOEXPERIMENT":
			continue
		case "GOTOOLCHAIN":
			if toolchain != "" {
				continue
			}
		}
		env = append(env, kv)
	}
	env = append(env, "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-mod=readonly")
	if toolchain != "" {
		env = append(env, "GOTOOLCHAIN="+toolchain)
	}
	return env
}

// Build runs one release build.
func Build(ctx context.Context, o BuildOptions) error {
	if err := ValidateStamp(o.Version, o.Commit); err != nil {
		return err
	}
	known := false
	for _, a := range Arches {
		known = known || a == o.Arch
	}
	if !known {
		return fmt.Errorf("arch %q: want one of %v", o.Arch, Arches)
	}
	goCmd := o.Go
	if goCmd == "" {
		goCmd = "go"
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return err
	}
	o.Out = out
	toolchain, err := Toolchain(o.SrcDir)
	if err != nil {
		return err
	}
	if HasLeanInit(o.SrcDir) {
		steps := [][]string{initArgs(o.Arch)}
		if st, err := os.Stat(filepath.Join(o.SrcDir, archivePkg)); err == nil && st.IsDir() {
			steps = append(steps, archiveArgs())
		}
		for _, args := range steps {
			ic := exec.CommandContext(ctx, goCmd, args...) // #nosec G204 -- fixed go subcommand and arguments
			ic.Dir = o.SrcDir
			ic.Env = BuildEnv(os.Environ(), o.Arch, toolchain)
			if b, err := ic.CombinedOutput(); err != nil {
				return fmt.Errorf("go build %s linux/%s: %w\n%s", args[len(args)-1], o.Arch, err, b)
			}
		}
		o.LeanInit = true
	}
	cmd := exec.CommandContext(ctx, goCmd, BuildArgs(o)...) // #nosec G204 -- fixed go subcommand; version and commit validated by ValidateStamp
	cmd.Dir = o.SrcDir
	cmd.Env = BuildEnv(os.Environ(), o.Arch, toolchain)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build linux/%s: %w\n%s", o.Arch, err, b)
	}
	if toolchain == "" {
		return nil
	}
	// Fail closed if the go command did not honour GOTOOLCHAIN.
	_, _, got, err := BinaryModules(o.Out)
	if err != nil {
		return err
	}
	if got != toolchain {
		return fmt.Errorf("go build linux/%s: built with %s, go.mod pins %s", o.Arch, got, toolchain)
	}
	return nil
}
