package mcp_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
)

// TestMain lets the test binary serve as the sandboxes' init: the daemon
// the end-to-end tests start re-executes its own binary with "init".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		if err := agent.Main(); err != nil {
			fmt.Fprintln(os.Stderr, "init:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
