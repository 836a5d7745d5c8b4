package main

import (
	"fmt"
	"os"

	"github.com/sandhold/sandhold/internal/agent/sandboxinit"
)

// isInit reports whether this process was started as a sandbox's init
// ("sandhold init", re-executed by the server into fresh namespaces). The
// init takes over before the CLI parses anything or installs any signal
// handling: it is PID 1 of the sandbox.
func isInit(args []string) bool { return len(args) > 1 && args[1] == "init" }

// runInit runs the init and returns the exit code.
func runInit() int {
	if err := sandboxinit.Entry(); err != nil {
		fmt.Fprintln(os.Stderr, "sandhold init:", err)
		return 1
	}
	return 0
}
