package sandbox

import (
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
)

// AssessCommand rates a command line the way exec.run does: the command
// guard's verdict, raised to dangerous for sudo. Other exec-like tools
// (shell sessions, the bash pipe) use it so every command has one rating.
func AssessCommand(g *guard.Guard, r ExecRequest) dispatch.Assessment {
	return assessCommand(g, r)
}
