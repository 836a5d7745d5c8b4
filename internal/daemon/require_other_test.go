//go:build !linux

package daemon

import "testing"

// requireSandboxes skips: sandboxes need Linux (the Linux variant, with
// the egress tests, checks for root).
func requireSandboxes(t *testing.T) {
	t.Helper()
	t.Skip("sandboxes need Linux")
}

// serveForTest fails: the restart test that re-executes the binary as a
// server runs on Linux only.
func serveForTest() int { return 2 }
