package release

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tool finds a pinned tool that `make test` installs into .tools, or
// skips: a host without it cannot run this test (and says why).
func tool(t *testing.T, name string) string {
	t.Helper()
	for dir, _ := filepath.Abs("."); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".tools", name)
			if _, err := os.Stat(p); err != nil {
				t.Skipf("%s is not installed in .tools (make test installs it first)", name)
			}
			return p
		}
		if dir == filepath.Dir(dir) {
			t.Fatal("no go.mod above the test")
		}
	}
}

func need(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not found on this host", c)
		}
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

const tinyMain = `package main

import (
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"
)

var version, commit = "dev", "unknown"

func main() {
	type mod struct {
		Path    string ` + "`json:\"path\"`" + `
		Version string ` + "`json:\"version\"`" + `
	}
	mods := []mod{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			mods = append(mods, mod{d.Path, d.Version})
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"version": version, "commit": commit, "go_version": runtime.Version(), "modules": mods})
}
`

var gitEnv = []string{
	"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
}

// tinyRepo is a git repository of a module shaped like sandhold's
// (cmd/sandhold, version and commit stamps, version --json), small enough
// to release in a test.
func tinyRepo(t *testing.T) (repo, commit string) {
	t.Helper()
	return tinyRepoMod(t, "module example.com/tiny\n\ngo 1.26\n")
}

// tinyRepoMod is tinyRepo with the given go.mod.
func tinyRepoMod(t *testing.T, goMod string) (repo, commit string) {
	t.Helper()
	repo = filepath.Join(t.TempDir(), "tiny")
	if err := os.MkdirAll(filepath.Join(repo, "cmd", "sandhold"), 0o750); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":               goMod,
		"LICENSE":              "MIT License\n",
		"cmd/sandhold/main.go": tinyMain,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run(t, repo, gitEnv, "git", "init", "-q")
	run(t, repo, gitEnv, "git", "add", ".")
	run(t, repo, gitEnv, "git", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "tiny")
	return repo, run(t, repo, nil, "git", "rev-parse", "HEAD")
}

func keyPair(t *testing.T, name string) string {
	t.Helper()
	k := filepath.Join(t.TempDir(), name)
	run(t, "", nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", k)
	return k
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "dist")
	run(t, "", nil, "cp", "-a", from, to)
	return to
}

// resign recomputes the sums and signs them, as a key holder would after
// changing an artifact: the checks past the signature must catch it.
func resign(t *testing.T, dir, key string) {
	t.Helper()
	if err := WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, SigFile))
	if err := Sign(context.Background(), filepath.Join(dir, SumsFile), key); err != nil {
		t.Fatal(err)
	}
}

func editJSON(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMakeAndVerify makes a whole release of a tiny module (both arches,
// SBOMs, sums, signature) and verifies it, then shows that each kind of
// tampering is caught.
func TestMakeAndVerify(t *testing.T) {
	need(t, "git", "ssh-keygen", "tar")
	cdx := tool(t, "cyclonedx-gomod")
	ctx := context.Background()
	// Pinned to the toolchain running the test (so nothing is fetched):
	// the provenance must record the pin.
	goMod := "module example.com/tiny\n\ngo 1.26\n"
	pinned := toolchainRe.MatchString(runtime.Version())
	if pinned {
		goMod += "\ntoolchain " + runtime.Version() + "\n"
	}
	repo, commit := tinyRepoMod(t, goMod)
	key := keyPair(t, "release")
	dist := filepath.Join(t.TempDir(), "dist")
	var log bytes.Buffer
	if err := Make(ctx, MakeOptions{Repo: repo, Out: dist, Key: key, CycloneDX: cdx, Log: &log}); err != nil {
		t.Fatalf("make: %v\n%s", err, log.String())
	}
	for _, f := range []string{SumsFile, SigFile, ProvenanceFile, "sandhold-linux-amd64", "sandhold-linux-arm64",
		"sandhold-linux-amd64.cdx.json", "sandhold-linux-arm64.spdx.json"} {
		if _, err := os.Stat(filepath.Join(dist, f)); err != nil {
			t.Errorf("release lacks %s", f)
		}
	}
	var prov Provenance
	b, _ := os.ReadFile(filepath.Join(dist, ProvenanceFile))
	if err := json.Unmarshal(b, &prov); err != nil || prov.Commit != commit || !strings.HasPrefix(prov.Version, "v0.0.0-20260102030405-"+commit[:12]) {
		t.Fatalf("provenance %+v (%v), want commit %s and its pseudo-version", prov, err, commit)
	}
	if pinned && (prov.GoVersion != runtime.Version() || len(prov.BuildCommand) == 0 || prov.BuildCommand[0] != "GOTOOLCHAIN="+runtime.Version()) {
		t.Fatalf("provenance records Go %s and the build command %q; want %s and GOTOOLCHAIN=%[3]s first", prov.GoVersion, prov.BuildCommand, runtime.Version())
	}
	ok := VerifyOptions{Dir: dist, PubKey: key + ".pub", Repo: repo, Commit: commit}
	if err := Verify(ctx, ok); err != nil {
		t.Fatalf("a fresh release does not verify: %v", err)
	}

	other := keyPair(t, "other")
	otherCommit := strings.Repeat("ab", 20)
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string) VerifyOptions
		want   string
	}{
		{"ArtifactChanged", func(t *testing.T, dir string) VerifyOptions {
			p := filepath.Join(dir, "sandhold-linux-arm64")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			_ = os.WriteFile(p, b, 0o600)
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}
		}, "sandhold-linux-arm64: sha256"},
		{"UnlistedFile", func(t *testing.T, dir string) VerifyOptions {
			_ = os.WriteFile(filepath.Join(dir, "extra"), []byte("x"), 0o600)
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}
		}, "extra is not listed"},
		{"SignedByAnotherKey", func(t *testing.T, dir string) VerifyOptions {
			resign(t, dir, other)
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}
		}, "signature"},
		{"SumsEditedAfterSigning", func(t *testing.T, dir string) VerifyOptions {
			p := filepath.Join(dir, SumsFile)
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, append(b, []byte(strings.Repeat("0", 64)+"  ghost\n")...), 0o600)
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}
		}, "signature"},
		{"NoPublicKey", func(t *testing.T, dir string) VerifyOptions {
			return VerifyOptions{Dir: dir, Repo: repo}
		}, "no public key"},
		{"SBOMListsAnExtraModule", func(t *testing.T, dir string) VerifyOptions {
			editJSON(t, filepath.Join(dir, "sandhold-linux-amd64.cdx.json"), func(m map[string]any) {
				cs, _ := m["components"].([]any)
				m["components"] = append(cs, map[string]any{"type": "library", "name": "example.com/ghost", "version": "v1.0.0", "purl": "pkg:golang/example.com/ghost@v1.0.0"})
			})
			resign(t, dir, key)
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}
		}, "in CycloneDX SBOM but not in binary: example.com/ghost@v1.0.0"},
		{"SPDXOfAnotherBinary", func(t *testing.T, dir string) VerifyOptions {
			editJSON(t, filepath.Join(dir, "sandhold-linux-arm64.spdx.json"), func(m map[string]any) {
				ps := m["packages"].([]any)
				ps[0].(map[string]any)["checksums"] = []any{map[string]any{"algorithm": "SHA256", "checksumValue": strings.Repeat("0", 64)}}
			})
			resign(t, dir, key)
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}
		}, "another binary's SHA-256"},
		{"ProvenanceClaimsAnotherCommit", func(t *testing.T, dir string) VerifyOptions {
			editJSON(t, filepath.Join(dir, ProvenanceFile), func(m map[string]any) { m["commit"] = otherCommit })
			resign(t, dir, key)
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}
		}, "not stamped with commit " + otherCommit},
		{"ReleaseOfAnotherCommitThanExpected", func(t *testing.T, dir string) VerifyOptions {
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo, Commit: otherCommit}
		}, "expected " + otherCommit},
		{"SourceArchiveNotOfTheCommit", func(t *testing.T, dir string) VerifyOptions {
			src := filepath.Join(dir, prov.Source)
			var buf bytes.Buffer
			if err := SourceArchive(ctx, repo, "other", commit, &buf); err != nil { // another prefix: other bytes
				t.Fatal(err)
			}
			_ = os.WriteFile(src, buf.Bytes(), 0o600)
			resign(t, dir, key)
			return VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}
		}, "source: git archive of"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, dist)
			err := Verify(ctx, c.tamper(t, dir))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
