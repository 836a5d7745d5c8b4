package gates

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestToolCacheUsesOnlyWhatVerifies: scripts/gotool.sh builds a pinned tool
// once into its cache and copies it from there, and a cached binary that is
// no longer what was built — its bytes changed, or another Go program with
// a matching digest file — is rebuilt, never handed out.
func TestToolCacheUsesOnlyWhatVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a pinned tool (module proxy or module cache)")
	}
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile")) // #nosec G304 -- the repository's Makefile
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBECONFORM_VERSION\s*:=\s*(\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no KUBECONFORM_VERSION in the Makefile")
	}
	tool := "github.com/yannh/kubeconform/cmd/kubeconform@" + string(m[1])
	cache, dests := t.TempDir(), t.TempDir()

	install := func(dest string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "scripts", "gotool.sh"), filepath.Join(dests, dest), tool) // #nosec G204 -- the repository's script, a fixed tool
		cmd.Env = append(os.Environ(), "TOOL_CACHE="+cache)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gotool.sh %s: %v\n%s", dest, err, out)
		}
		return string(out)
	}
	digest := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p) // #nosec G304 -- a file this test made
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}

	if out := install("first"); !strings.Contains(out, "building") {
		t.Fatalf("an empty cache was not built into: %s", out)
	}
	want := digest(filepath.Join(dests, "first"))
	entries, _ := filepath.Glob(filepath.Join(cache, "*", "*", "kubeconform"))
	if len(entries) != 1 {
		t.Fatalf("cache entries: %v", entries)
	}
	cached := entries[0]

	if out := install("second"); strings.Contains(out, "building") {
		t.Fatalf("a verified cache entry was rebuilt: %s", out)
	}
	if got := digest(filepath.Join(dests, "second")); got != want {
		t.Fatalf("the copy from the cache differs: %s, want %s", got, want)
	}

	// Changed bytes: the digest recorded at build time no longer matches.
	f, err := os.OpenFile(cached, os.O_APPEND|os.O_WRONLY, 0) // #nosec G304 -- a file this test made
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("tampered"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if out := install("third"); !strings.Contains(out, "does not verify") {
		t.Fatalf("a changed cache entry was used: %s", out)
	}
	if got := digest(filepath.Join(dests, "third")); got != want {
		t.Fatalf("after the rebuild: %s, want %s", got, want)
	}

	// Another Go program with a digest file to match: its build
	// information names another package.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self) // #nosec G304 -- this test binary
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cached, b, 0o755); err != nil { // #nosec G306 -- an executable in the test's cache
		t.Fatal(err)
	}
	if err := os.WriteFile(cached+".sha256", []byte(digest(cached)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := install("fourth"); !strings.Contains(out, "does not verify") {
		t.Fatalf("a foreign binary in the cache was used: %s", out)
	}
	if got := digest(filepath.Join(dests, "fourth")); got != want {
		t.Fatalf("after the rebuild: %s, want %s", got, want)
	}
}
