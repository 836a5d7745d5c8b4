// Package cdptest starts a headless Chromium on the host for tests of the
// CDP client and the browser operations: loopback only, a temporary
// profile, killed with its whole process group when the test ends. A host
// without Chromium (or where it cannot start) skips the test with the
// reason; it never fails or crashes the test binary.
package cdptest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/testenv"
)

// startWait caps how long Chromium may take to write its DevTools port.
const startWait = 30 * time.Second

// Browser is a running host Chromium.
type Browser struct {
	// Addr is its DevTools address, 127.0.0.1:port.
	Addr string
}

// Dial opens a fresh connection to the browser's DevTools port.
func (b *Browser) Dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", b.Addr)
}

// Path is the Chromium binary tests use, or "" when none is installed.
func Path() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Start launches a headless Chromium for t, or skips t saying why not.
func Start(t testing.TB) *Browser {
	t.Helper()
	bin := Path()
	if bin == "" {
		t.Skip("no chromium on this host (make deps installs it)")
	}
	dir := t.TempDir()
	args := []string{
		"--headless=new", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"--user-data-dir=" + dir, "--no-first-run", "--no-default-browser-check", "--disable-gpu",
		"--disable-dev-shm-usage", "--disable-background-networking", "--disable-extensions",
		"--disable-component-update", "--disable-sync", "--mute-audio", "--hide-scrollbars",
		"--window-size=1280,720",
	}
	if os.Geteuid() == 0 {
		// Chromium's own sandbox refuses to run as root; these tests drive
		// a page of a loopback test server only.
		args = append(args, "--no-sandbox")
	}
	args = append(args, "about:blank")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...) // #nosec G204 -- a test launching the host's Chromium with fixed flags
	cmd.Stderr = &stderr
	cmd.SysProcAttr = procAttr()
	// Started from a thread held for the browser's life: its Pdeathsig
	// follows that thread (testenv.StartHeld says why).
	exited, err := testenv.StartHeld(cmd)
	if err != nil {
		t.Skipf("chromium does not start here: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	portFile := filepath.Join(dir, "DevToolsActivePort")
	deadline := time.Now().Add(startWait)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Skipf("chromium exited at start: %s", tail(stderr.String()))
		default:
		}
		if b, err := os.ReadFile(portFile); err == nil { // #nosec G304 -- the test's own temp dir
			line, _, _ := strings.Cut(string(b), "\n")
			if port, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && port > 0 {
				return &Browser{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Skipf("chromium wrote no DevTools port within %s: %s", startWait, tail(stderr.String()))
	return nil
}

func tail(s string) string {
	if len(s) > 400 {
		return s[len(s)-400:]
	}
	return s
}
