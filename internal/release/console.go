package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The web console (web/, TypeScript bundled by esbuild) is embedded into
// the binary from internal/console/dist, which git does not track: a
// release built without it ships a console page that only says how to
// build one. So a release builds it, from the commit's own sources, before
// the Go build:
//
//   - `npm ci --offline`: exactly the packages web/package-lock.json pins
//     (each checked against the lock's integrity hash), from the npm cache
//     only. The release step never reaches a registry; a package missing
//     from the cache fails the release (run `make console` once, online,
//     to fill the cache) instead of shipping a binary without its console.
//   - `--ignore-scripts`: no package's install script runs on the release
//     machine (esbuild finds its platform binary without one).
//   - `node build.mjs`: the bundle, written into the tree's
//     internal/console/dist.
//
// The lock file's SHA-256 goes into provenance.json, so a verifier knows
// which JavaScript went into the binaries (the SBOMs list Go modules only).

// consoleDir is the console's npm project inside the module.
const consoleDir = "web"

// consoleIndex is the file the console build must leave behind.
const consoleIndex = "internal/console/dist/index.html"

// ConsoleCommands are the command lines of the console build, run in web/.
func ConsoleCommands() [][]string {
	return [][]string{
		{"npm", "ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"},
		{"node", "build.mjs"},
	}
}

// HasConsole reports whether the module at dir has the console's sources
// with their lock file.
func HasConsole(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, consoleDir, "package-lock.json"))
	return err == nil
}

// BuildConsole builds the console of the module at tree into its
// internal/console/dist and returns the SHA-256 of the lock file it was
// installed from.
func BuildConsole(ctx context.Context, tree string, log io.Writer) (string, error) {
	lock, err := os.ReadFile(filepath.Join(tree, consoleDir, "package-lock.json")) // #nosec G304 -- the release tree's own lock file
	if err != nil {
		return "", fmt.Errorf("console: %w", err)
	}
	for _, args := range ConsoleCommands() {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...) // #nosec G204 -- fixed command lines (ConsoleCommands)
		cmd.Dir = filepath.Join(tree, consoleDir)
		// Never the registry: offline above, and no update check.
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false")
		out, err := cmd.CombinedOutput()
		if log != nil && len(out) > 0 {
			_, _ = log.Write(out)
		}
		if err != nil {
			return "", fmt.Errorf("console: %s: %w\n%s(fill the npm cache once, online: make console)",
				strings.Join(args, " "), err, tail(out, 2000))
		}
	}
	if _, err := os.Stat(filepath.Join(tree, consoleIndex)); err != nil {
		return "", fmt.Errorf("console: the build left no %s: %w", consoleIndex, err)
	}
	sum := sha256.Sum256(lock)
	return hex.EncodeToString(sum[:]), nil
}

// tail returns at most the last n bytes of b, as text.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	s := string(b)
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}
