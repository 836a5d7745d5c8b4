package mcp

import (
	"strings"

	"github.com/sandhold/sandhold/internal/dispatch"
)

// ToolName is the MCP name of a dispatcher tool: dots become underscores
// (exec.run → exec_run), since some MCP clients refuse dots. The reverse
// is a lookup in the table nameTable builds, never a replacement.
func ToolName(dispatchName string) string { return strings.ReplaceAll(dispatchName, ".", "_") }

// nameTable maps MCP names to dispatcher tools. Reserved names (the AIO
// aliases) are claimed first; then each tool in name order claims its
// ToolName. A tool whose MCP name is taken is returned in skipped.
func nameTable(tools []*dispatch.Tool, reserved []string) (byMCP map[string]*dispatch.Tool, skipped []string) {
	claimed := make(map[string]bool, len(tools)+len(reserved))
	for _, r := range reserved {
		claimed[r] = true
	}
	byMCP = make(map[string]*dispatch.Tool, len(tools))
	for _, t := range tools { // Dispatcher.Tools is sorted by name
		n := ToolName(t.Name)
		if claimed[n] {
			skipped = append(skipped, t.Name)
			continue
		}
		claimed[n] = true
		byMCP[n] = t
	}
	return byMCP, skipped
}
