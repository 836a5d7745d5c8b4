package client

import (
	"testing"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
)

// TestMain lets the test binary serve as the sandboxes' init of the
// servers the end-to-end tests start.
func TestMain(m *testing.M) { agenttest.Main(m) }
