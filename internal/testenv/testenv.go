// Package testenv skips a test, with the reason, when this host cannot run
// what it needs, and waits for conditions. It imports only the standard
// library, so the tests of every package can use it, the agent's (below
// everything) included.
//
// The -short rule: `go test -short` (make unit) starts nothing of the
// host's — no sandbox, browser, PostgreSQL, mount, cgroup or privileged
// child. Every gate of an environment (RequireSandboxes here, pgtest,
// cdptest, and each package's require* helpers) calls SkipShort first;
// TestEveryGateHonoursShort finds a gate that does not.
package testenv

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// SkipShort skips t under -short, saying what the test would start (the
// -short rule above). what reads after "this test": "starts Chromium".
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test " + what + " (run make e2e)")
	}
}

// Bounds of Eventually with their reasons.
const (
	// eventuallyBound only keeps a broken build from hanging: the
	// machine may be loaded (CI runs beside a CPU hog), so it is generous,
	// and no test reads it as a figure.
	eventuallyBound = 60 * time.Second
	// eventuallyMaxPoll caps the interval between polls, which starts at
	// a millisecond and doubles (a condition met at once costs nothing).
	eventuallyMaxPoll = 50 * time.Millisecond
)

// Eventually polls cond until it holds and returns how long that took
// (tests log it; none asserts it). Tests wait on conditions, never on a
// duration: past eventuallyBound the test fails, naming what never
// happened.
func Eventually(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for poll := time.Millisecond; !cond(); poll = min(2*poll, eventuallyMaxPoll) {
		if time.Since(start) > eventuallyBound {
			t.Fatalf("%s: not within %s", what, eventuallyBound)
		}
		time.Sleep(poll)
	}
	return time.Since(start)
}

// RequireSandboxes skips t unless this process can build real sandboxes:
// Linux, root (id mappings and cgroups) and user namespaces, and each of
// hostFiles present (sandboxes see the host's /usr: a test that runs
// python3 names /usr/bin/python3). Under -short (make unit) it always
// skips: real sandboxes and servers are for make e2e.
func RequireSandboxes(t testing.TB, hostFiles ...string) {
	t.Helper()
	SkipShort(t, "starts real sandboxes")
	if runtime.GOOS != "linux" {
		t.Skip("sandboxes need Linux")
	}
	if os.Geteuid() != 0 {
		t.Skip("sandboxes need root (user namespaces with id maps, cgroups); run the tests as root")
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		t.Skip("user namespaces are not available:", err)
	}
	for _, f := range hostFiles {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("needs %s on the host (sandboxes see the host's /usr)", f)
		}
	}
}
