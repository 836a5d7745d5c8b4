package sandbox_test

import (
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/sandbox/sandboxtools"
)

// The sandbox's tools are defined in sandboxtools, which imports this
// package; its own tests dispatch them through sandbox.Tools.
func init() { sandbox.SetTools(sandboxtools.Tools) }
