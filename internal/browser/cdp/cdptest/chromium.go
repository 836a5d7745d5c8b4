// Package cdptest starts a headless Chromium on the host for tests of the
// CDP client and the browser operations: loopback only, a temporary
// profile and a temporary TMPDIR, killed with its whole process group when
// the test ends. A host without Chromium (or where it cannot start) skips
// the test with the reason; it never fails or crashes the test binary.
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
	"sync"
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
	testenv.SkipShort(t, "starts Chromium")
	bin := Path()
	if bin == "" {
		t.Skip("no chromium on this host (make deps installs it)")
	}
	cleanStaleOnce.Do(func() { cleanStale(os.TempDir(), staleAge) })
	dir := t.TempDir()
	// Chromium makes a directory for its singleton socket in TMPDIR
	// (org.chromium.Chromium.XXXXXX) and removes it only on a clean exit;
	// killed, as here, it leaves it behind. Its own TMPDIR goes with the
	// test (removed after the kill: cleanups run last first). Not a
	// t.TempDir: a socket's path must fit in 108 bytes, and those carry
	// the test's name.
	tmp, err := os.MkdirTemp("", "cdp-")
	if err != nil {
		t.Skipf("no TMPDIR for chromium: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
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
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
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

// staleAge is how old a singleton directory must be before cleanStale
// may take it: a starting Chromium binds its socket within moments of
// making the directory.
const staleAge = 10 * time.Minute

var cleanStaleOnce sync.Once

// cleanStale removes what Chromiums killed by earlier test runs (before
// each had its own TMPDIR) left in dir: org.chromium.Chromium.*
// directories of this user, older than minAge, holding nothing but a
// SingletonSocket and SingletonCookie, whose socket no process listens on
// (a live Chromium's is bound: it is listed in /proc/net/unix). Anything
// else is left alone.
func cleanStale(dir string, minAge time.Duration) {
	matches, err := filepath.Glob(filepath.Join(dir, "org.chromium.Chromium.*"))
	if err != nil || len(matches) == 0 {
		return
	}
	bound, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return
	}
	for _, d := range matches {
		if staleSingleton(d, minAge, string(bound)) {
			_ = os.RemoveAll(d)
		}
	}
}

func staleSingleton(d string, minAge time.Duration, bound string) bool {
	fi, err := os.Lstat(d)
	if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < minAge {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return false
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name() != "SingletonSocket" && e.Name() != "SingletonCookie" {
			return false
		}
	}
	return !strings.Contains(bound, " "+filepath.Join(d, "SingletonSocket")+"\n")
}
