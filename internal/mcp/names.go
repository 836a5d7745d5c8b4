package mcp

import (
	"github.com/sandhold/sandhold/internal/dispatch"
)

// CustomPrefix starts the MCP name of every custom tool (custom_fmt for the
// custom tool fmt): custom tools live in their own namespace, so none can
// ever be listed, or called, under a built-in's name. No built-in's MCP
// name starts with it (a test walks them).
const CustomPrefix = "custom_"

// ToolName is the MCP name of a built-in dispatcher tool: dots become
// underscores (exec.run → exec_run), since some MCP clients refuse dots.
// The reverse is a lookup in the table nameTable builds, never a
// replacement.
func ToolName(dispatchName string) string { return dispatch.FlatName(dispatchName) }

// NameOf is t's MCP name: ToolName for a built-in, CustomPrefix and
// ToolName for a custom tool.
func NameOf(t *dispatch.Tool) string {
	if t.Custom {
		return CustomPrefix + ToolName(t.Name)
	}
	return ToolName(t.Name)
}

// nameTable maps MCP names to the tools of one caller: the tools it may
// see, never anyone else's, so nothing another key defines can take a
// name in this caller's list. Reserved names (the AIO aliases) are
// claimed first, then every built-in in name order, then every custom tool
// (under CustomPrefix). A tool whose MCP name is taken is returned in
// skipped (customtool refuses such names, so this only guards the table).
func nameTable(tools []*dispatch.Tool, reserved []string) (byMCP map[string]*dispatch.Tool, skipped []string) {
	claimed := make(map[string]bool, len(tools)+len(reserved))
	for _, r := range reserved {
		claimed[r] = true
	}
	byMCP = make(map[string]*dispatch.Tool, len(tools))
	for _, custom := range []bool{false, true} {
		for _, t := range tools { // sorted by name
			if t.Custom != custom {
				continue
			}
			n := NameOf(t)
			if claimed[n] {
				skipped = append(skipped, t.Name)
				continue
			}
			claimed[n] = true
			byMCP[n] = t
		}
	}
	return byMCP, skipped
}

// Lookup finds the tool a caller means by name among the tools it may see
// (sorted by name): its dotted name, or its MCP name in that caller's
// table. Nil when there is none.
func Lookup(tools []*dispatch.Tool, name string) *dispatch.Tool {
	for _, t := range tools {
		if t.Name == name {
			return t
		}
	}
	byMCP, _ := nameTable(tools, nil)
	return byMCP[name]
}
