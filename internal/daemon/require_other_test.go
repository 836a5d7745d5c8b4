//go:build !linux

package daemon

// serveForTest fails: the restart test that re-executes the binary as a
// server runs on Linux only.
func serveForTest() int { return 2 }
