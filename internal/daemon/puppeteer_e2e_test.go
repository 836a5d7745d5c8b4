package daemon_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/daemon/daemontest"
)

// TestPuppeteerOverTheCDPRelay drives the sandbox's browser with
// Puppeteer (test/puppeteer-ts, puppeteer-core's connect) the ways the
// README documents: browserWSEndpoint from /json/version with the key
// header, and with a one-time ticket and no header. Each opens a page
// served inside the sandbox and reads its title; no credential, a forged
// key, a forged ticket and a ticket used twice are refused.
func TestPuppeteerOverTheCDPRelay(t *testing.T) {
	requireChromium(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "test", "puppeteer-ts"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "puppeteer-core")); err != nil {
		t.Skip("puppeteer-core is not installed: run `npm ci --prefix test/puppeteer-ts` (make deps does)")
	}
	// 8000: the port of the page served inside the sandbox (a port
	// outside the preview ports is closed to the sandbox's own processes).
	d := daemontest.Start(t, func(c *config.Config) { c.PreviewPorts = []uint16{8000} })
	admin := daemontest.NewClient(t, d)
	k := admin.NewKey("agent-a", "agent")
	a := admin.As(k.Key)
	id := a.NewSandbox(nil)
	serveInSandbox(t, a, id, map[string]string{
		"index.html": `<!doctype html><title>served inside</title><p id="msg">hello from the sandbox</p>`,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "puppeteer-e2e.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SANDHOLD_URL=http://"+d.Addr(), "SANDHOLD_SANDBOX="+id, "SANDHOLD_KEY="+k.Key,
		"SANDHOLD_PAGE=http://127.0.0.1:8000/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("puppeteer: %v\n%s", err, out)
	}
	t.Logf("puppeteer: %s", out)
	for _, want := range []string{`"withKey":{"title":"served inside","msg":"hello from the sandbox"}`, `"withTicket":{"title":"served inside"`,
		`"withoutCredential":"refused"`, `"forgedKey":"refused"`, `"forgedTicket":"refused"`, `"ticketAgain":"refused"`} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("puppeteer said %s, want %s", out, want)
		}
	}
	// The relay audited the connections, each under the agent's key.
	auditHasVerdict(t, admin, id, "browser.cdp", "allow", id)
}
