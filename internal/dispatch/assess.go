package dispatch

import (
	"slices"

	"github.com/sandhold/sandhold/internal/guard"
)

// Assessment is a call's risk after looking at its arguments.
type Assessment struct {
	Risk    guard.Risk
	Rules   []string
	Reasons []string
	Dynamic bool
	// Names are the command names a command line runs (guard.Names), for
	// the policy's command allow/deny lists.
	Names []string
	// Paths are the paths a call touches (guard.Paths for a command line;
	// a file tool's path), for the policy's path rules.
	Paths []string
	// Templates are the templates a call uses (a create's template, a
	// build's FROM) as name:tag, "host" for the host's, for the policy's
	// template rules.
	Templates []string
	// Trees are directories whose whole subtree a call walks (grep, find,
	// glob, a recursive list or watch, an archive): a path rule denies
	// the walk when the path it names lies below one of them.
	Trees []string
	// Guard is the command guard's verdict when the call runs a command
	// line or inline code (exec, shell, bash, code; a custom tool that
	// calls them); nil for calls that run none. Every audit record of such
	// a call carries it.
	Guard *GuardVerdict
	// Digest identifies the definition that will run, for a tool whose
	// behaviour is data (a custom tool: its steps, templates and the
	// definitions of the custom tools it calls): an approval binds it, so
	// a redefinition voids the approval. Empty for built-ins.
	Digest string
	// Plan is what the call will run, step by step (a custom tool's
	// rendered steps), for the operator who approves it.
	Plan []PlannedStep
}

// GuardVerdict is what the command guard said about the command a call
// runs, kept apart from the call's risk (which the declared tier, sudo or
// a custom tool's derivation may raise).
type GuardVerdict struct {
	Risk    guard.Risk
	Dynamic bool
	Rules   []string
}

// Label is the verdict in one word for the audit record: "dynamic" (built
// at run time), "flagged" (a Dangerous-tier rule matched; the record's
// rules name it), else the guard's tier ("safe", "medium").
func (g GuardVerdict) Label() string {
	switch {
	case g.Dynamic:
		return "dynamic"
	case g.Risk >= guard.Dangerous && len(g.Rules) > 0:
		return "flagged"
	case !g.Risk.Valid():
		return guard.Dangerous.String()
	}
	return g.Risk.String()
}

// Merge combines the verdicts of several commands (a custom tool's steps):
// the highest tier, dynamic if any is, every rule.
func (g *GuardVerdict) Merge(o *GuardVerdict) *GuardVerdict {
	if o == nil {
		return g
	}
	if g == nil {
		c := *o
		c.Rules = slices.Clone(o.Rules)
		return &c
	}
	out := &GuardVerdict{Risk: max(g.Risk, o.Risk), Dynamic: g.Dynamic || o.Dynamic, Rules: slices.Clone(g.Rules)}
	for _, r := range o.Rules {
		if !slices.Contains(out.Rules, r) {
			out.Rules = append(out.Rules, r)
		}
	}
	return out
}

// Merge is the assessment of two things done together (a custom tool's
// steps, the lines of one write to a shell): the higher tier, dynamic if
// either is, every rule, reason, name, path and tree once, the guard's
// verdicts merged. a's Plan and Digest are kept.
func (a Assessment) Merge(o Assessment) Assessment {
	a.Risk = max(a.Risk, o.Risk)
	a.Dynamic = a.Dynamic || o.Dynamic
	a.Rules = appendNew(a.Rules, o.Rules...)
	a.Reasons = appendNew(a.Reasons, o.Reasons...)
	a.Names = appendNew(a.Names, o.Names...)
	a.Paths = appendNew(a.Paths, o.Paths...)
	a.Trees = appendNew(a.Trees, o.Trees...)
	a.Guard = a.Guard.Merge(o.Guard)
	return a
}

// appendNew appends the strings of add that to lacks.
func appendNew(to []string, add ...string) []string {
	for _, s := range add {
		if !slices.Contains(to, s) {
			to = append(to, s)
		}
	}
	return to
}

// FromVerdict is the Assessment of a call that runs the command line the
// guard classified as v.
func FromVerdict(v guard.Verdict) Assessment {
	return Assessment{Risk: v.Risk, Rules: v.Rules, Reasons: v.Reasons, Dynamic: v.Dynamic,
		Names: guard.Names(v), Paths: guard.Paths(v),
		Guard: &GuardVerdict{Risk: v.Risk, Dynamic: v.Dynamic, Rules: v.Rules}}
}

// Flagged reports whether the guard found something worth an operator's
// eyes: code built at run time, or a rule of the Dangerous tier (rm -rf /,
// curl | sh, credential reads …). A tool that is Dangerous only by its
// declared tier is not flagged.
func (a Assessment) Flagged() bool {
	return a.Dynamic || (a.Risk >= guard.Dangerous && len(a.Rules) > 0)
}

// AssessArgs returns what Dispatch would assess for tool t and typed args: the
// declared tier raised by the tool's Assess (custom tools assess the calls
// they make with it).
func (t *Tool) AssessArgs(args any) Assessment {
	a := Assessment{Risk: t.Risk}
	if t.Assess != nil {
		got := t.Assess(args)
		a.Rules, a.Reasons, a.Dynamic, a.Names, a.Paths, a.Trees, a.Guard = got.Rules, got.Reasons, got.Dynamic, got.Names, got.Paths, got.Trees, got.Guard
		a.Digest, a.Plan = got.Digest, got.Plan
		a.Risk = max(a.Risk, got.Risk)
		if !a.Risk.Valid() {
			a.Risk = guard.Dangerous
		}
	}
	return a
}
