package aiocompat_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
)

// TestMain lets the test binary serve as the sandboxes' init: the daemon
// starts inits by re-executing its own binary with the argument "init".
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
