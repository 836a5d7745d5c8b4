package sandbox

import (
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// Tools is sandboxtools.Tools, which stands above this package: the
// external test package (tools_ext_test.go) sets it before any test runs,
// so this package's tests dispatch the sandbox's real tools.
var Tools func(*Manager, *guard.Guard) []dispatch.Tool

// SetTools sets Tools (tools_ext_test.go).
func SetTools(f func(*Manager, *guard.Guard) []dispatch.Tool) { Tools = f }
