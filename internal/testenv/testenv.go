// Package testenv skips a test, with the reason, when this host cannot run
// what it needs. It imports only the standard library, so the tests of
// every package can use it, the agent's (below everything) included.
package testenv

import (
	"os"
	"runtime"
	"testing"
)

// RequireSandboxes skips t unless this process can build real sandboxes:
// Linux, root (id mappings and cgroups) and user namespaces, and each of
// hostFiles present (sandboxes see the host's /usr: a test that runs
// python3 names /usr/bin/python3). Under -short (make unit) it always
// skips: real sandboxes and servers are for make e2e.
func RequireSandboxes(t testing.TB, hostFiles ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test starts real sandboxes (run make e2e)")
	}
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
