package console_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
	"github.com/sandhold/sandhold/internal/console"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
	"github.com/sandhold/sandhold/internal/template/templatetest"
)

// TestMain lets the test binary serve as the sandboxes' init.
func TestMain(m *testing.M) { agenttest.Main(m) }

// chromiumPaths are where distributions put Chromium (Debian: chromium).
var chromiumPaths = []string{"chromium", "chromium-browser", "google-chrome"}

// TestConsoleInBrowser drives the console in the distribution's Chromium
// with playwright-core (web/e2e/console-e2e.mjs) against a real server:
// sign in, create a sandbox, type into the terminal and read the output,
// reconnect, upload a file and see it listed, the fleet table (owner name,
// expiry, CPU as a share of the limit under a busy loop, filter, sort,
// bulk delete, actions by state), form errors at their field in view, the
// audit log (a record's detail, polling reads hidden), an approval with
// its command and the guard's reasons, the Templates page (import,
// inspect, a sandbox from it, delete), /docs (Redoc: order, search,
// authentication, field descriptions), HALT and a call refused, unhalt,
// the noVNC page, sign out; then keyboard only and at a 375-px viewport. Screenshots of each page go to
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
	env := []string{"BASE_URL=http://" + d.Addr(), "ADMIN_KEY=" + d.AdminKey(), "CHROMIUM=" + chrome, "OUT_DIR=" + shots}
	var templateShots []string
	if tar := templateArchive(t); tar != "" {
		env = append(env, "TEMPLATE_TAR="+tar) // the Templates page imports it
		templateShots = []string{"15-templates", "15a-template-built"}
	}
	cmd.Env = browserEnv(tmp, env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node e2e/console-e2e.mjs:\n%s", out)
	t.Logf("screenshots: %s", shots)
	if err != nil || !strings.Contains(string(out), "\nPASS") {
		t.Fatalf("the browser run failed: %v", err)
	}
	for _, name := range append([]string{"01-signin", "02-sandboxes", "02a-create-error", "02b-fleet-selected", "02c-paused", "03-terminal", "04-files",
		"05-audit", "05a-audit-record", "06-approvals", "09-halted", "11-vnc", "14-mobile-sandboxes", "16-docs", "17-docs-field"}, templateShots...) {
		if st, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s missing: %v", name, err)
		}
	}
}

// templateArchive writes a docker save tarball of a static busybox for the
// Templates page to import, or answers "" (and says why) where the host
// has no static busybox.
func templateArchive(t *testing.T) string {
	var layer []byte
	t.Run("template fixture", func(t *testing.T) { layer = templatetest.BusyboxTar(t) })
	if layer == nil {
		t.Log("no template fixture: the Templates page's import is not exercised")
		return ""
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config.Env = "linux", runtime.GOARCH, []string{"PATH=/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("example/e2e-bb:1")
	p := filepath.Join(t.TempDir(), "e2e-bb.tar")
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
	return p
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
