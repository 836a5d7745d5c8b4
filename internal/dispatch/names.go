package dispatch

import "strings"

// FlatName is a tool name with its dots written as underscores
// (exec.run → exec_run): the form MCP shows, since some MCP clients refuse
// dots. Two names with the same flat form would be one name there, so a
// custom tool may not take a name whose flat form another tool has.
func FlatName(name string) string { return strings.ReplaceAll(name, ".", "_") }
