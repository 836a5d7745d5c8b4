package cdptest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKilledChromiumLeavesNothingInTMPDIR: a browser killed with SIGKILL
// at the end of its test (as Start's cleanup does) leaves nothing in the
// test's TMPDIR. Chromium makes org.chromium.Chromium.XXXXXX there for its
// singleton socket and removes it only on a clean exit; Start gives it a
// TMPDIR of its own that goes with the test.
func TestKilledChromiumLeavesNothingInTMPDIR(t *testing.T) {
	if Path() == "" {
		t.Skip("no chromium on this host (make deps installs it)")
	}
	d, err := os.MkdirTemp("", "cdptest-tmpdir-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(d) }()
	t.Setenv("TMPDIR", d)
	started := false
	t.Run("browser", func(t *testing.T) {
		b := Start(t)
		started = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := b.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		if m, _ := filepath.Glob(filepath.Join(d, "cdp-*", "org.chromium.Chromium.*")); len(m) == 0 {
			t.Error("the running browser made no singleton directory in its TMPDIR; the test proves nothing")
		}
	})
	if !started {
		t.Skip("chromium did not start")
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left in TMPDIR after the browser was killed: %s", e.Name())
	}
}

// TestCleanStale: of the singleton directories earlier runs left, only old
// ones of this user with nothing but the singleton files and no listener
// on the socket are removed.
func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	mk := func(name string, files ...string) string {
		t.Helper()
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(d, f), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	age := func(d string, at time.Time) {
		t.Helper()
		if err := os.Chtimes(d, at, at); err != nil {
			t.Fatal(err)
		}
	}
	stale := mk("org.chromium.Chromium.stale", "SingletonCookie", "SingletonSocket")
	empty := mk("org.chromium.Chromium.empty")
	young := mk("org.chromium.Chromium.young", "SingletonCookie", "SingletonSocket")
	other := mk("org.chromium.Chromium.other", "SingletonSocket", "notes")
	unrelated := mk("something.else", "SingletonSocket")
	live := mk("org.chromium.Chromium.live", "SingletonCookie")
	ln, err := net.Listen("unix", filepath.Join(live, "SingletonSocket"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	for _, d := range []string{stale, empty, other, unrelated, live} {
		age(d, old)
	}
	cleanStale(dir, 10*time.Minute)
	for d, want := range map[string]bool{stale: false, empty: false, young: true, other: true, unrelated: true, live: true} {
		_, err := os.Stat(d)
		if got := err == nil; got != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(d), got, want)
		}
	}
}
