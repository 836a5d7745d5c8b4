package agent

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLeanInitLinksNoSeccompCompiler: the lean init installs the seccomp
// program compiled at build time (package seccomp/compiled) and must not
// link the compiler's library, whose package initialisation keeps 190-260
// kB in every process that links it.
func TestLeanInitLinksNoSeccompCompiler(t *testing.T) {
	for _, pkg := range goListDeps(t, "github.com/sandhold/sandhold/cmd/sandhold-init") {
		switch pkg {
		case "github.com/elastic/go-seccomp-bpf", "github.com/elastic/go-seccomp-bpf/arch",
			"golang.org/x/net/bpf", "github.com/sandhold/sandhold/internal/isolate/seccomp":
			t.Errorf("cmd/sandhold-init links %s", pkg)
		}
	}
}

// TestLeanInitLinksNoArchiveCodecs: extraction and packing run in the
// extractor program (cmd/sandhold-archive), so the init, which every
// sandbox start executes, links none of the codecs, crypto or os/user
// that package archive brings (BENCHMARKS.md, "The extractor out of the
// init": ≈ 28 package inits and ≈ 40 page faults per start).
func TestLeanInitLinksNoArchiveCodecs(t *testing.T) {
	for _, pkg := range goListDeps(t, "github.com/sandhold/sandhold/cmd/sandhold-init") {
		switch {
		case pkg == "archive/tar", pkg == "archive/zip", pkg == "compress/gzip", pkg == "compress/flate",
			pkg == "math/big", pkg == "os/user", pkg == "crypto", strings.HasPrefix(pkg, "crypto/"),
			strings.HasPrefix(pkg, "github.com/klauspost/"),
			pkg == "github.com/sandhold/sandhold/internal/archive":
			t.Errorf("cmd/sandhold-init links %s", pkg)
		}
	}
	// The other side: the extractor does link the codecs (this test
	// would pass vacuously if cmd/sandhold-archive were not the program).
	deps := goListDeps(t, "github.com/sandhold/sandhold/cmd/sandhold-archive")
	if !slices.Contains(deps, "github.com/sandhold/sandhold/internal/archive") {
		t.Error("cmd/sandhold-archive does not link package archive")
	}
	if slices.Contains(deps, "github.com/sandhold/sandhold/internal/agent") {
		t.Error("cmd/sandhold-archive links package agent (the init's code)")
	}
}

// protoDeps are the packages of this module and beyond the standard
// library that package proto links: the small packages its types are
// made of.
var protoDeps = []string{
	module + "internal/agent/proto",
	module + "internal/archive/deny",         // Deny, the sensitive-path policy of walks and packs
	module + "internal/archive/spec",         // TransferReq's format and limits
	module + "internal/fault",                // archive/spec's error kinds
	module + "internal/isolate/rootfs",       // the layer count that bounds a message's descriptors
	"golang.org/x/sys/unix",                  //
	"vendor/golang.org/x/net/dns/dnsmessage", // package net's own
}

const module = "github.com/sandhold/sandhold/"

// launcherDeps are what the launcher links: proto's, and the descriptor
// hygiene it shares with the init. The init program (sandboxinit.Entry)
// links the launcher too.
var launcherDeps = append([]string{module + "internal/agent/launcher", module + "internal/agent/fds"}, protoDeps...)

// initDeps are what the in-sandbox init links: the launcher's (the same
// program) and the isolation it applies to itself.
var initDeps = append([]string{
	module + "internal/agent/sandboxinit",
	module + "internal/isolate/caps",                // the bounding set, no_new_privs
	module + "internal/isolate/landlock",            // the file and TCP rules
	module + "internal/isolate/seccomp/compiled",    // the filter, compiled at build time
	"github.com/creack/pty",                         // commands' terminals
	"kernel.org/pub/linux/libs/security/libcap/psx", // the cgroup namespace on every thread
	"github.com/landlock-lsm/go-landlock/landlock",
	"github.com/landlock-lsm/go-landlock/landlock/internal",
	"github.com/landlock-lsm/go-landlock/landlock/syscall",
}, launcherDeps...)

// TestEachSideLinksOnlyItsOwn: the programs around a sandbox link only
// what they run. Package proto, which the server, the launcher and the
// init share, links none of their code; the launcher and the in-sandbox
// init link none of the server's: no HTTP, no dispatcher, no store, not
// package agent (the server's client of the init). Each list below is
// everything beyond the standard library a side may link, so a new
// import of anything else fails here.
func TestEachSideLinksOnlyItsOwn(t *testing.T) {
	tests := []struct {
		name, pkg string
		// allowed are the packages outside the standard library it may
		// link; every other one fails the test.
		allowed []string
	}{
		{"proto links no side of the protocol", module + "internal/agent/proto", protoDeps},
		{"the launcher links no server code", module + "internal/agent/launcher", launcherDeps},
		{"the init links no client or server code", module + "internal/agent/sandboxinit", initDeps},
		{"the lean init program is the init and the launcher", module + "cmd/sandhold-init",
			append([]string{module + "cmd/sandhold-init"}, initDeps...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			deps := goListDeps(t, tc.pkg)
			if !slices.Contains(deps, tc.pkg) {
				t.Fatalf("go list -deps did not list %s itself: the reader is broken", tc.pkg)
			}
			for _, pkg := range linkedBeyondStd(deps) {
				if !slices.Contains(tc.allowed, pkg) {
					t.Errorf("%s links %s", tc.pkg, pkg)
				}
			}
			for _, pkg := range serverStd {
				if slices.Contains(deps, pkg) {
					t.Errorf("%s links %s (the server's)", tc.pkg, pkg)
				}
			}
		})
	}
}

// serverStd are standard packages only the server's side uses: none of
// them belongs in a program that runs beside or inside a sandbox.
var serverStd = []string{"net/http", "crypto/tls", "database/sql", "html/template", "os/user"}

// linkedBeyondStd is the packages of deps outside the standard library.
func linkedBeyondStd(deps []string) []string {
	var out []string
	for _, pkg := range deps {
		first, _, _ := strings.Cut(pkg, "/")
		if strings.Contains(first, ".") || first == "vendor" {
			out = append(out, pkg)
		}
	}
	return out
}

// goListDeps is every package pkg links (go list -deps); the test skips
// without the go tool.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH:", err)
	}
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}
