package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
	"github.com/sandhold/sandhold/internal/console"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestMain lets the test binary serve as the sandboxes' init.
func TestMain(m *testing.M) { agenttest.Main(m) }

// chromiumPaths are where distributions put Chromium (Debian: chromium).
var chromiumPaths = []string{"chromium", "chromium-browser", "google-chrome"}

// TestConsoleInBrowser drives the console in the distribution's Chromium
// with playwright-core (web/e2e/console-e2e.mjs) against a real server:
// sign in, create a sandbox, type into the terminal and read the output,
// reconnect, upload a file and see it listed, the admin pages, HALT and
// see a call refused, unhalt, the noVNC page, sign out; then keyboard only
// and at a 375-px viewport. Screenshots of each page go to
// $SANDHOLD_CONSOLE_SHOTS if set, else to the test's artifact directory
// (t.ArtifactDir: kept with -artifacts); the test logs where.
func TestConsoleInBrowser(t *testing.T) {
	node, chrome, web, tmp := requireBrowserRun(t)
	d := daemontest.Start(t, nil)
	if !console.EmbeddedBuilt() {
		t.Skip("this test binary was built without the console's assets: run `make console` (make build and make test do) before go test")
	}
	shots := os.Getenv("SANDHOLD_CONSOLE_SHOTS")
	if shots == "" {
		// Kept with `go test -artifacts [-outputdir DIR]` (under
		// DIR/_artifacts), else removed with the test.
		shots = filepath.Join(t.ArtifactDir(), "screenshots")
	}
	if err := os.MkdirAll(shots, 0o750); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("e2e", "console-e2e.mjs"))
	cmd.Dir = web
	cmd.Env = browserEnv(tmp, "BASE_URL=http://"+d.Addr(), "ADMIN_KEY="+d.AdminKey(), "CHROMIUM="+chrome, "OUT_DIR="+shots)
	out, err := cmd.CombinedOutput()
	t.Logf("node e2e/console-e2e.mjs:\n%s", out)
	t.Logf("screenshots: %s", shots)
	if err != nil || !strings.Contains(string(out), "\nPASS") {
		t.Fatalf("the browser run failed: %v", err)
	}
	for _, name := range []string{"01-signin", "02-sandboxes", "03-terminal", "04-files", "05-audit", "09-halted", "11-vnc", "14-mobile-sandboxes"} {
		if st, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s missing: %v", name, err)
		}
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
