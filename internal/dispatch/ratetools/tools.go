// Package ratetools declares the rate limiter's tool (ratelimit.rules) for
// the dispatcher. It lives above both packages, not in ratelimit, because
// the dispatcher applies the limits: package ratelimit cannot import
// dispatch.
package ratetools

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// ToolRules reports the rate-limit rules in force for its caller;
// /v1/sandbox/security includes its answer when the server registers it.
var ToolRules = dispatch.Ref[struct{}, ratelimit.Report]("ratelimit.rules")

// Tools is ratelimit.rules: the limiter's rules for the caller's role
// (every role; Safe).
func Tools(l *ratelimit.Limiter) []dispatch.Tool {
	return []dispatch.Tool{
		dispatch.Define(ToolRules, dispatch.Spec{Description: "The rate-limit rules in force for the caller", Risk: guard.Safe,
			Roles: []auth.Role{auth.RoleAdmin, auth.RoleAgent, auth.RoleViewer}},
			func(_ context.Context, c auth.Caller, _ struct{}) (ratelimit.Report, error) {
				return l.ReportFor(string(c.Role), c.RateLimits), nil
			},
			dispatch.Hooks[struct{}, ratelimit.Report]{}),
	}
}
