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
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}
