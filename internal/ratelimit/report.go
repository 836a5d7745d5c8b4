package ratelimit

import "sort"

// RuleInfo is one rule of the rate limits in force.
type RuleInfo struct {
	Category   string  `json:"category"`
	PerMinute  float64 `json:"per_minute,omitempty"`
	Burst      int     `json:"burst,omitempty"`
	Concurrent int     `json:"concurrent,omitempty"`
}

// Report is the answer of the ratelimit.rules tool.
type Report struct {
	Enabled bool       `json:"enabled" doc:"false when SANDBOX_RATE_LIMIT=false"`
	Role    string     `json:"role" doc:"the caller's role"`
	Scope   string     `json:"scope" doc:"which rules these are"`
	Rules   []RuleInfo `json:"rules"`
}

// ReportScope says what Report holds: the limiter's base rules with the
// role's overrides. The policy's per-role and per-key overrides replace
// whole rules on top of them at call time; the dispatcher does not expose
// its resolved view, so they are not merged here.
const ReportScope = "server base rules per key; per-role and per-key overrides in the policy (GET /v1/policy, rate_limits) replace them"

// ReportScopeKey is ReportScope for a key created with its own limits.
const ReportScopeKey = "server base rules with this key's own limits (set when it was created), which also decide over the policy's overrides"

// Report lists the rules a key of role gets from the limiter (see
// ReportScope), sorted by category. The sandbox and execution caps are
// left out: the sandbox manager enforces them with its own settings, and
// the security report shows those.
func (l *Limiter) Report(role string) Report { return l.ReportFor(role, nil) }

// ReportFor is Report for a key with its own limits (set when the key was
// created), which replace the rules of their categories.
func (l *Limiter) ReportFor(role string, keyRules Rules) Report {
	out := Report{Enabled: !l.disabled, Role: role, Scope: ReportScope, Rules: []RuleInfo{}}
	if len(keyRules) > 0 {
		out.Scope = ReportScopeKey
	}
	for cat, r := range l.Resolve(role, keyRules) {
		if cat == Sandboxes || cat == Executions {
			continue
		}
		out.Rules = append(out.Rules, RuleInfo{Category: cat.String(), PerMinute: r.PerMinute, Burst: r.Burst, Concurrent: r.Concurrent})
	}
	sort.Slice(out.Rules, func(i, j int) bool { return out.Rules[i].Category < out.Rules[j].Category })
	return out
}
