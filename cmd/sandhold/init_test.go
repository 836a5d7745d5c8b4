package main

import (
	"os"
	"testing"
)

// runMainEnv makes the test binary run main() instead of the tests.
const runMainEnv = "SANDHOLD_TEST_RUN_MAIN"

// TestMain lets the test binary serve as the sandboxes' init, like the
// real binary does.
func TestMain(m *testing.M) {
	if isInit(os.Args) {
		os.Exit(runInit())
	}
	// A test that needs a real server process (descriptors it inherited,
	// signals) re-executes this binary as the sandhold command.
	// main returns only when the command succeeded (every failure calls
	// os.Exit): exit 0 then, never fall through to m.Run. A server child
	// that ran the tests after its SIGTERM kept running them (the whole
	// package, servers of its own) until startServer's cleanup killed it,
	// and left their temp dirs in /tmp — a data dir of up to 600 MB each.
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
