package ratelimit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// KeyCategories are the categories an admin may limit for one key when the
// key is created: the rate categories the dispatcher counts. Concurrency
// caps (terminal, sandboxes, executions) and the failed-auth lockout (per
// client address) are held by other parts of the server and are not per-key
// settings.
func KeyCategories() []Category { return []Category{File, Exec, Command, Browser, Read, Manage} }

// ParseKeyRules reads a key's own limits in the syntax of
// SANDBOX_RATE_LIMITS ("command=2/m,code=5/m:5") and checks that every
// category is one of KeyCategories.
func ParseKeyRules(spec string) (Rules, error) {
	r, err := ParseRules(spec)
	if err != nil {
		return nil, err
	}
	if err := r.checkKeyCategories(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r Rules) checkKeyCategories() error {
	for c := range r {
		if !slices.Contains(KeyCategories(), c) {
			return fmt.Errorf("a key's own limits name file, code, command, browser, read or manage; %s is not settable per key", c)
		}
	}
	return nil
}

// Within checks that every rule of r is at or below the rule of the same
// category in maxima (the server's configured limits): a key created with
// its own limits may be held tighter than the server's, never looser. A
// category that maxima does not limit accepts any rule.
func (r Rules) Within(maxima Rules) error {
	for _, c := range Categories() {
		rule, ok := r[c]
		if !ok {
			continue
		}
		top, limited := maxima[c]
		if !limited || top.PerMinute <= 0 {
			continue
		}
		if rule.PerMinute > top.PerMinute || max(rule.Burst, 1) > max(top.Burst, 1) {
			return fmt.Errorf("%s=%s is above the server's limit %s=%s", c, formatRule(rule), c, formatRule(top))
		}
	}
	return nil
}

// String formats r in ParseRules' syntax, categories in declaration order,
// so that ParseRules(r.String()) gives r back. The empty string for no rules.
func (r Rules) String() string {
	var parts []string
	for _, c := range Categories() {
		if rule, ok := r[c]; ok {
			parts = append(parts, c.String()+"="+formatRule(rule))
		}
	}
	return strings.Join(parts, ",")
}

func formatRule(rule Rule) string {
	if rule.PerMinute <= 0 {
		return strconv.Itoa(rule.Concurrent)
	}
	return strconv.FormatFloat(rule.PerMinute, 'g', -1, 64) + "/m:" + strconv.Itoa(max(rule.Burst, 1))
}

// Base returns a copy of the limiter's base rules (the server's configured
// limits, before role and key overrides).
func (l *Limiter) Base() Rules { return Rules{}.Merge(l.rules) }
