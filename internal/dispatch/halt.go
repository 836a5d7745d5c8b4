package dispatch

import (
	"maps"

	"github.com/sandhold/sandhold/internal/guard"
)

// haltExempt are the only tools that run while the server is halted, each
// with the reason. HALT is deny by default: every other registered tool —
// a built-in added tomorrow, a custom tool, a tool with no rate-limit
// category — is refused at every nesting level, however safe its
// arguments look. What is here controls the server or reads what the
// server itself holds (its records, not a sandbox): nothing on the list
// starts, restarts or reaches into a sandbox, and a tool on it still runs
// only when its call is assessed Safe.
var haltExempt = map[string]string{
	"control.get":    "how a caller learns that, why and since when the server is halted",
	"control.halt":   "halting again updates the reason and freezes what started meanwhile",
	"control.unhalt": "the way out of a HALT",
	// Approvals: deciding runs nothing; a granted call passes HALT again
	// when it runs.
	"approvals.list":    "read-only: the operator's queue",
	"approvals.get":     "read-only: a caller polls its own approval",
	"approvals.approve": "a grant runs nothing by itself; the granted call passes HALT when it runs",
	"approvals.deny":    "refusing a waiting call only stops work",
	"keys.list":         "read-only admin view",
	"keys.revoke":       "incident response: a revoked key's work stops (its sandboxes are stopped)",
	"policy.get":        "read-only admin view",
	"policy.set":        "tighten the policy before unhalting (admin only; touches no sandbox)",
	"audit.query":       "read-only: what happened, for the incident",
	"audit.verify":      "read-only: whether the record is intact",
	"sandbox.list":      "read-only: the server's records of the caller's sandboxes (starts none)",
	"sandbox.get":       "read-only: one record (starts none)",
	"sandbox.resources": "read-only: cgroup figures of the running (frozen) sandboxes",
	"exec.read":         "read-only: an execution's status and output, held by the server",
	"exec.kill":         "stops work: HALT killed every execution already, so this only confirms it",
}

// HaltExempt returns the tools that run while halted, with their reasons
// (SECURITY.md lists them; the conformance test checks each is a tool).
func HaltExempt() map[string]string { return maps.Clone(haltExempt) }

// runsWhileHalted reports whether a call of t assessed a runs while the
// server is halted: only an exempt tool, and only at Safe.
func runsWhileHalted(t *Tool, a Assessment) bool {
	_, ok := haltExempt[t.Name]
	return ok && a.Risk == guard.Safe
}
