package release

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// consoleMarker is what the tiny console's build writes into its page.
const consoleMarker = "tiny console built by build.mjs"

// addConsole gives a tiny repository a web console shaped like
// sandhold's: web/ with a lock file and build.mjs writing
// internal/console/dist, embedded by a package the binary prints from
// (`sandhold-linux-amd64 console`). It commits and returns the commit.
func addConsole(t *testing.T, repo string) string {
	t.Helper()
	files := map[string]string{
		"web/package.json": `{"name":"tiny-console","version":"0.0.0","private":true}` + "\n",
		"web/package-lock.json": `{
  "name": "tiny-console",
  "version": "0.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {
      "name": "tiny-console",
      "version": "0.0.0"
    }
  }
}
`,
		"web/build.mjs": `import { mkdirSync, writeFileSync } from 'node:fs';
mkdirSync('../internal/console/dist', { recursive: true });
writeFileSync('../internal/console/dist/index.html', '<p>` + consoleMarker + `</p>\n');
`,
		"internal/console/dist/.gitignore": "*\n!.gitignore\n",
		"internal/console/console.go": `package console

import "embed"

//go:embed all:dist
var Dist embed.FS
`,
		"cmd/sandhold/console.go": `package main

import (
	"os"

	"example.com/tiny/internal/console"
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == "console" {
		b, _ := console.Dist.ReadFile("dist/index.html")
		_, _ = os.Stdout.Write(b)
		os.Exit(0)
	}
}
`,
	}
	for name, body := range files {
		p := filepath.Join(repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run(t, repo, gitEnv, "git", "add", ".")
	run(t, repo, gitEnv, "git", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "console")
	return run(t, repo, nil, "git", "rev-parse", "HEAD")
}

// A release of a module with a console builds the console from the
// commit's lock file, offline, into the binaries; the provenance names the
// lock, and verify checks it against the commit.
func TestMakeBuildsTheConsole(t *testing.T) {
	need(t, "git", "ssh-keygen", "tar", "npm", "node")
	cdx := tool(t, "cyclonedx-gomod")
	ctx := context.Background()
	repo, _ := tinyRepo(t)
	commit := addConsole(t, repo)
	key := keyPair(t, "release")
	dist := filepath.Join(t.TempDir(), "dist")
	var log strings.Builder
	if err := Make(ctx, MakeOptions{Repo: repo, Out: dist, Key: key, CycloneDX: cdx, Log: &log}); err != nil {
		t.Fatalf("make: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "console  web/ built offline") {
		t.Fatalf("make did not build the console:\n%s", log.String())
	}
	out, err := exec.Command(filepath.Join(dist, BinaryName("amd64")), "console").Output()
	if err != nil || !strings.Contains(string(out), consoleMarker) {
		t.Fatalf("the released binary's console: %q %v", out, err)
	}
	var prov Provenance
	b, _ := os.ReadFile(filepath.Join(dist, ProvenanceFile))
	if err := json.Unmarshal(b, &prov); err != nil || len(prov.ConsoleLock) != 64 || len(prov.ConsoleCommands) != 2 {
		t.Fatalf("provenance %s (%v): no console lock or commands", b, err)
	}
	if err := Verify(ctx, VerifyOptions{Dir: dist, PubKey: key + ".pub", Repo: repo, Commit: commit}); err != nil {
		t.Fatalf("a release with a console does not verify: %v", err)
	}
	dir := copyDir(t, dist)
	editJSON(t, filepath.Join(dir, ProvenanceFile), func(m map[string]any) { m["console_lock_sha256"] = strings.Repeat("0", 64) })
	resign(t, dir, key)
	if err := Verify(ctx, VerifyOptions{Dir: dir, PubKey: key + ".pub", Repo: repo}); err == nil || !strings.Contains(err.Error(), "console was installed from a lock file") {
		t.Fatalf("provenance naming another console lock: %v", err)
	}
}

// The console build never reaches a registry: a locked package that is not
// in the npm cache fails the build (and says how to fill the cache)
// instead of being fetched, or of a release shipping without its console.
func TestConsoleBuildIsOffline(t *testing.T) {
	need(t, "npm", "node")
	tree := t.TempDir()
	web := filepath.Join(tree, "web")
	if err := os.MkdirAll(web, 0o750); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"package.json": `{"name":"t","version":"0.0.0","private":true,"dependencies":{"sandhold-never-cached":"1.0.0"}}`,
		"package-lock.json": `{"name":"t","version":"0.0.0","lockfileVersion":3,"requires":true,"packages":{
"":{"name":"t","version":"0.0.0","dependencies":{"sandhold-never-cached":"1.0.0"}},
"node_modules/sandhold-never-cached":{"version":"1.0.0","resolved":"https://registry.npmjs.org/sandhold-never-cached/-/sandhold-never-cached-1.0.0.tgz",
"integrity":"sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="}}}`,
		"build.mjs": `throw new Error('build ran without its packages');`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(web, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("npm_config_cache", t.TempDir()) // an empty cache
	_, err := BuildConsole(context.Background(), tree, nil)
	if err == nil || !strings.Contains(err.Error(), "npm ci --offline") || !strings.Contains(err.Error(), "make console") {
		t.Fatalf("a lock with an uncached package: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(web, "node_modules", "sandhold-never-cached")); serr == nil {
		t.Fatal("the uncached package was installed")
	}
}
