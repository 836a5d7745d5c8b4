package ratelimit

import (
	"maps"
	"strings"
)

// Which limit each tool counts against. A tool declares its category where
// it is defined (file, code, browser, terminal); the tables below are the
// rest, in one place so the split is reviewable: the commands a package
// declares as code, the tools that declare none, and the few that are left
// unmetered on purpose. Every tool the server registers is in one of them
// or declares a category — the chokepoint conformance test fails
// otherwise, so a new tool cannot arrive unmetered by omission.

// commandTools are the tools that run a command: exact names, or name
// prefixes ending in ".". Their packages declare them with Exec; they count
// as Command (a shell loop of an agent is many small commands, while code
// execution keeps the seed's 10/min).
var commandTools = []string{
	"exec.run", // POST /v1/sandboxes/{id}/exec
	"shell.",   // AIO /v1/shell/* (PTY sessions)
	"bash.",    // AIO /v1/bash/*
}

// undeclared are the categories of tools that declare none where they are
// defined (exact names).
var undeclared = map[string]Category{
	// Reads: metadata and status, nothing changes (and nothing starts).
	"approvals.get":           Read,
	"approvals.list":          Read,
	"audit.query":             Read,
	"audit.verify":            Read,
	"auth.check":              Read,
	"bash.output":             Read,
	"bash.sessions":           Read,
	"code.info":               Read,
	"code.sessions":           Read,
	"control.get":             Read,
	"exec.read":               Read,
	"keys.list":               Read,
	"nodejs.info":             Read,
	"nodejs.session_get":      Read,
	"nodejs.sessions":         Read,
	"policy.get":              Read,
	"proxy.excludes.list":     Read,
	"proxy.mappings.list":     Read,
	"proxy.upstream.get":      Read,
	"ratelimit.rules":         Read,
	"sandbox.get":             Read,
	"sandbox.hooks.list":      Read,
	"sandbox.list":            Read,
	"sandbox.observe.live":    Read,
	"sandbox.observe.report":  Read,
	"sandbox.observe.reports": Read,
	"sandbox.observe.status":  Read,
	"sandbox.resources":       Read,
	"shell.sessions":          Read,
	"shell.stats":             Read,
	"shell.view":              Read,
	"shell.wait":              Read,
	// A ticket is a 30-second, one-use credential for a WebSocket: cheap
	// to mint, and what it opens is limited by its own category.
	"tickets.create": Read,
	"tools.list":     Read,

	// Commands: they start, drive or stop a shell or an execution inside
	// the sandbox.
	"bash.kill":                Command,
	"bash.session_close":       Command,
	"bash.session_create":      Command,
	"bash.write":               Command,
	"exec.kill":                Command,
	"sandbox.info":             Command, // runs the sandbox's tools to describe them
	"sandbox.packages":         Command, // runs pip / npm in the sandbox
	"shell.input":              Command,
	"shell.kill":               Command,
	"shell.session_create":     Command,
	"shell.session_delete":     Command,
	"shell.session_delete_all": Command,
	"shell.session_update":     Command,

	// Management: lifecycle and configuration.
	"code.session.delete":           Manage,
	"network.update":                Manage,
	"nodejs.session_delete":         Manage,
	"nodejs.session_update":         Manage,
	"proxy.diagnose":                Manage, // connects out from the host
	"proxy.excludes.add":            Manage,
	"proxy.excludes.remove":         Manage,
	"proxy.health":                  Manage, // connects to the upstream
	"proxy.mappings.add":            Manage,
	"proxy.mappings.remove":         Manage,
	"proxy.upstream.remove":         Manage,
	"proxy.upstream.set":            Manage,
	"sandbox.create":                Manage,
	"sandbox.create_default":        Manage,
	"sandbox.delete":                Manage,
	"sandbox.hibernate":             Manage,
	"sandbox.hooks.register":        Manage,
	"sandbox.hooks.remove":          Manage,
	"sandbox.observe.export":        Manage,
	"sandbox.observe.report_delete": Manage,
	"sandbox.observe.start":         Manage,
	"sandbox.observe.stop":          Manage,
	"sandbox.pause":                 Manage,
	"sandbox.resume":                Manage,
	"sandbox.start":                 Manage,
	"tools.define":                  Manage,
	"tools.delete":                  Manage,
}

// unmetered are the tools no limit counts, each with its reason: the
// operator's own controls (admin only), which must answer however busy the
// admin key is — a HALT or a revocation refused by a rate limit would keep
// running what the operator means to stop.
var unmetered = map[string]string{
	"approvals.approve": "admin only: the operator's decision on a waiting call",
	"approvals.deny":    "admin only: the operator's decision on a waiting call",
	"control.halt":      "admin only: the emergency stop is never refused by a limit",
	"control.unhalt":    "admin only: the way out of a HALT",
	"keys.create":       "admin only: the operator's key management",
	"keys.revoke":       "admin only: stopping a key is never refused by a limit",
	"policy.set":        "admin only: the operator's policy",
	"tools.publish":     "admin only: the operator's decision to share a custom tool",
}

// ForTool returns the category a call of tool counts against: Command for
// a command tool declared Exec; the table's category for a tool that
// declares none; else what it declared. 0: not metered (Unmetered says
// which tools may be).
func ForTool(tool string, declared Category) Category {
	switch declared {
	case 0:
		return undeclared[tool]
	case Exec:
		for _, p := range commandTools {
			if tool == p || (strings.HasSuffix(p, ".") && strings.HasPrefix(tool, p)) {
				return Command
			}
		}
	}
	return declared
}

// Unmetered returns the tools no limit counts, with their reasons.
func Unmetered() map[string]string { return maps.Clone(unmetered) }
