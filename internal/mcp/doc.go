// Package mcp is sandhold's Model Context Protocol surface: the dispatcher's
// tools served over streamable HTTP at /mcp (official go-sdk), AIO
// Sandbox's MCP tool names as aliases, and the stdio bridge behind
// `sandhold mcp`.
//
// It is a transport, not a capability: every tool call, alias included,
// goes through dispatch.Dispatcher.Call with the authenticated caller, so
// HALT, roles, rate limits, the risk policy, approvals and audit apply
// exactly as on the HTTP API, and errors carry the same public messages.
//
// What it stops:
//   - one key driving another key's session: every MCP session belongs to
//     the key that opened it; a session id presented with another key is
//     "session not found", and each key has its own MCP server whose tool
//     list shows only the tools its role may call;
//   - a revoked key keeping a live session: Revoke closes the key's
//     sessions (the auth service's OnRevoke hook), and every later request
//     with the key is refused by the auth middleware;
//   - session exhaustion: sessions are capped per key and overall, and idle
//     sessions are closed.
//
// # Tool names
//
// Dispatcher tools are named with dots (exec.run, sandbox.create); some MCP
// clients refuse dots in tool names, so each dot becomes an underscore:
// exec.run ↔ exec_run, sandbox.create ↔ sandbox_create. The mapping is a
// table built from the registry, never a string replacement in reverse
// (file.read_text and file_read.text would both give file_read_text: the
// first name in sorted order keeps it and the other is left out of MCP and
// logged). The AIO alias names below are reserved first.
//
// # AIO aliases
//
// AIO Sandbox's MCP tools are offered under their names and parameters:
// sandbox_execute_bash (→ exec.run on the caller's default sandbox),
// sandbox_execute_code (→ the code tool), sandbox_file_operations
// (→ the file.* tool its action names), sandbox_str_replace_editor
// (→ the file editor tool) and sandbox_get_context (a report of the
// default sandbox, its home and workspace and the tools available). An
// alias is listed only while a tool it translates to is registered and
// callable by the caller; the lists follow the registry as tools come and
// go (Dispatcher.OnChange), and clients get notifications/tools/list_changed.
package mcp
