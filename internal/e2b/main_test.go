package e2b_test

import (
	"testing"

	"github.com/sandhold/sandhold/internal/agent/agenttest"
)

// TestMain lets the test binary serve as the sandboxes' init.
func TestMain(m *testing.M) { agenttest.Main(m) }
