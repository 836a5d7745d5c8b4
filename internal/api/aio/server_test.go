package aio

import (
	"testing"

	"github.com/sandhold/sandhold/internal/api/apitest"
)

// newServer is a test server with AIO's auth tools and rows, as the daemon
// wires them.
func newServer(tb testing.TB) *apitest.Server {
	tb.Helper()
	s := apitest.New(tb, nil)
	for _, tool := range AuthTools() {
		s.D.MustRegister(tool)
	}
	AuthRoutes(s.Server)
	return s
}
