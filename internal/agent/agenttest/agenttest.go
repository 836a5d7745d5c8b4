// Package agenttest lets a test binary serve as a sandbox's init. Servers
// start inits by re-executing their own binary with the argument "init"; in
// a test that binary is the test binary, so every test package that starts
// sandboxes runs its tests through Main:
//
//	func TestMain(m *testing.M) { agenttest.Main(m) }
package agenttest

import (
	"fmt"
	"os"
	"testing"

	"github.com/sandhold/sandhold/internal/agent/sandboxinit"
)

// Main runs the init (or the init launcher, sandboxinit.Entry) when the binary
// was started as one, else the tests; it exits with their status.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		if err := sandboxinit.Entry(); err != nil {
			fmt.Fprintln(os.Stderr, "init:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
