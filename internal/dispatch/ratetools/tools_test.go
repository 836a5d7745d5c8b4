package ratetools_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/dispatch/ratetools"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// TestRulesReportsTheCallersRules: ratelimit.rules answers a typed Report
// of the role's rules, sorted, without the sandbox manager's caps, and
// says when the limiter is off.
func TestRulesReportsTheCallersRules(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		l := ratelimit.New(ratelimit.Options{Disabled: disabled,
			Roles: map[string]ratelimit.Rules{"agent": {ratelimit.File: {PerMinute: 7, Burst: 3}}}})
		d := dispatch.New(dispatch.Options{})
		for _, tl := range ratetools.Tools(l) {
			d.MustRegister(tl)
		}
		rep, err := ratetools.ToolRules.Call(context.Background(), d, auth.Caller{KeyID: "key_a", Role: auth.RoleAgent}, struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Enabled == disabled || rep.Role != "agent" || rep.Scope == "" {
			t.Fatalf("disabled=%v: report %+v", disabled, rep)
		}
		var cats []string
		var file ratelimit.RuleInfo
		for _, r := range rep.Rules {
			cats = append(cats, r.Category)
			if r.Category == ratelimit.File.String() {
				file = r
			}
		}
		if !slices.IsSorted(cats) || slices.Contains(cats, ratelimit.Sandboxes.String()) || slices.Contains(cats, ratelimit.Executions.String()) {
			t.Fatalf("categories %v: want sorted, without the manager's caps", cats)
		}
		if file.PerMinute != 7 || file.Burst != 3 {
			t.Fatalf("file rule %+v: want the agent role's override", file)
		}
	}
}

// TestRulesReportsTheKeysOwnLimits: a key created with its own limits sees
// them in the report (GET /v1/sandbox/security's rate_limits).
func TestRulesReportsTheKeysOwnLimits(t *testing.T) {
	l := ratelimit.New(ratelimit.Options{})
	d := dispatch.New(dispatch.Options{})
	for _, tl := range ratetools.Tools(l) {
		d.MustRegister(tl)
	}
	c := auth.Caller{KeyID: "key_a", Role: auth.RoleAgent, RateLimits: ratelimit.Rules{ratelimit.Command: {PerMinute: 2, Burst: 2}}}
	rep, err := ratetools.ToolRules.Call(context.Background(), d, c, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rep.Rules, func(r ratelimit.RuleInfo) bool { return r.Category == "command" })
	if i < 0 || rep.Rules[i].PerMinute != 2 || rep.Rules[i].Burst != 2 || rep.Scope != ratelimit.ReportScopeKey {
		t.Fatalf("report %+v", rep)
	}
}
