package release

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestToolchain(t *testing.T) {
	cases := []struct {
		name, goMod, want, err string
	}{
		{"ToolchainLine", "module m\n\ngo 1.26.8\n\ntoolchain go1.27.3\n", "go1.27.3", ""},
		{"ReleaseCandidate", "module m\ngo 1.28\ntoolchain go1.28rc1\n", "go1.28rc1", ""},
		{"GoLineNamesARelease", "module m\n\ngo 1.27.3\n", "go1.27.3", ""},
		{"GoLineIsALanguageVersion", "module m\n\ngo 1.26\n", "", ""},
		{"ToolchainDefault", "module m\ngo 1.26.8\ntoolchain default\n", "", ""},
		{"CommentIgnored", "module m\ngo 1.26.8 // the language\ntoolchain go1.27.3 // the compiler\n", "go1.27.3", ""},
		{"NoGoLine", "module m\n", "", ""},
		{"NotARelease", "module m\ngo 1.26.8\ntoolchain go1.27.3-custom\n", "", "want a Go release"},
		{"ShellInToolchain", "module m\ngo 1.26.8\ntoolchain go1.27.3;true\n", "", "want a Go release"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(c.goMod), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := Toolchain(dir)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Toolchain = %q, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Toolchain = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if _, err := Toolchain(t.TempDir()); err == nil {
		t.Fatal("a directory without go.mod pins nothing silently; want an error")
	}
}

// TestBuildEnvPinsTheToolchain: a machine's GOTOOLCHAIN=local (or any
// other value) does not reach a release build of a module that pins one.
func TestBuildEnvPinsTheToolchain(t *testing.T) {
	base := []string{"HOME=/h", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOARCH=386"}
	env := BuildEnv(base, "arm64", "go1.27.3")
	var tcs []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOTOOLCHAIN="); ok {
			tcs = append(tcs, v)
		}
	}
	if !slices.Equal(tcs, []string{"go1.27.3"}) || !slices.Contains(env, "GOARCH=arm64") || slices.Contains(env, "GOARCH=386") || !slices.Contains(env, "HOME=/h") {
		t.Fatalf("BuildEnv = %q; want GOTOOLCHAIN=go1.27.3 only, GOARCH=arm64, HOME kept", env)
	}
	// No pin: the caller's toolchain choice stands.
	if env := BuildEnv(base, "amd64", ""); !slices.Contains(env, "GOTOOLCHAIN=local") {
		t.Fatalf("BuildEnv without a pin = %q; want the caller's GOTOOLCHAIN kept", env)
	}
}

// TestBuildHonoursTheToolchainPin: with GOTOOLCHAIN=local in the
// environment and the module proxy off, a module pinned to a toolchain
// this machine does not have is not built with the local Go instead: the
// build fails naming the pinned toolchain.
func TestBuildHonoursTheToolchainPin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	need(t, "git")
	t.Setenv("GOTOOLCHAIN", "local")
	t.Setenv("GOPROXY", "off")
	repo, _ := tinyRepoMod(t, "module example.com/tiny\n\ngo 1.26\n\ntoolchain go1.99.0\n")
	err := Build(context.Background(), BuildOptions{SrcDir: repo, Out: filepath.Join(t.TempDir(), "sandhold"), Arch: "amd64", Version: "v0.0.0-test", Commit: strings.Repeat("0123456789", 4)})
	if err == nil || !strings.Contains(err.Error(), "go1.99.0") {
		t.Fatalf("Build = %v; want a failure naming go1.99.0 (the local Go must not build a module pinned elsewhere)", err)
	}
}
