package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the sandboxes' init, like the
// real binary does.
func TestMain(m *testing.M) {
	if isInit(os.Args) {
		os.Exit(runInit())
	}
	os.Exit(m.Run())
}
