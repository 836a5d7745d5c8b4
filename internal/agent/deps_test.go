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

// TestProtoLinksNoSideOfTheProtocol: package proto is what the server,
// the launcher and the in-sandbox init share (messages, limits, path and
// pattern checks), so it links none of their code: of this module only
// the small packages its types are made of, and of the rest only the
// standard library and x/sys.
func TestProtoLinksNoSideOfTheProtocol(t *testing.T) {
	const module = "github.com/sandhold/sandhold/"
	allowed := map[string]bool{
		module + "internal/agent/proto":          true,
		module + "internal/archive/deny":         true, // Deny, the sensitive-path policy of walks and packs
		module + "internal/archive/spec":         true, // TransferReq's format and limits
		module + "internal/fault":                true, // archive/spec's error kinds
		module + "internal/isolate/rootfs":       true, // the layer count that bounds a message's descriptors
		"golang.org/x/sys/unix":                  true,
		"vendor/golang.org/x/net/dns/dnsmessage": true, // package net's own
	}
	deps := goListDeps(t, module+"internal/agent/proto")
	for _, pkg := range deps {
		first, _, _ := strings.Cut(pkg, "/")
		if !strings.Contains(first, ".") && first != "vendor" {
			continue // the standard library
		}
		if !allowed[pkg] {
			t.Errorf("package proto links %s", pkg)
		}
	}
	if !slices.Contains(deps, module+"internal/agent/proto") {
		t.Fatal("go list -deps did not list proto itself: the reader is broken")
	}
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
