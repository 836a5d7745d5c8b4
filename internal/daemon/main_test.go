package daemon

import (
	"os"
	"testing"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
)

// TestMain lets the test binary serve as the sandboxes' init, and as a
// whole server for the restart test ("serve-test").
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve-test" {
		os.Exit(serveForTest())
	}
	agenttest.Main(m)
}
