package guard

import (
	"fmt"
	"strings"
)

// Risk is a risk tier. The tiers are ordered: Safe < Medium < Dangerous, so a
// policy compares them with < and takes the highest of several with max.
//
// The zero Risk is deliberately not a tier: a Verdict that was never filled in
// must not read as Safe. Callers treat an invalid Risk as Dangerous (see Valid).
type Risk int

const (
	// Safe: reads or inspects, changes nothing outside its own output.
	Safe Risk = iota + 1
	// Medium: writes or runs something the guard cannot see into; also
	// "unknown" risk.
	Medium
	// Dangerous: matches a dangerous rule, or is dynamic.
	Dangerous
)

// Valid reports whether r is one of the three tiers.
func (r Risk) Valid() bool { return r >= Safe && r <= Dangerous }

// String returns "safe", "medium" or "dangerous".
func (r Risk) String() string {
	switch r {
	case Safe:
		return "safe"
	case Medium:
		return "medium"
	case Dangerous:
		return "dangerous"
	}
	return fmt.Sprintf("Risk(%d)", int(r))
}

// ParseRisk maps a tier name to a Risk, case-insensitively. "unknown" and any
// other unrecognised name count as Medium (the SECURITY-RULES default for
// unknown risk); use UnmarshalText to reject typos instead.
func ParseRisk(s string) Risk {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "safe":
		return Safe
	case "dangerous":
		return Dangerous
	}
	return Medium
}

// MarshalText encodes r as its name; an invalid Risk is an error.
func (r Risk) MarshalText() ([]byte, error) {
	if !r.Valid() {
		return nil, fmt.Errorf("marshal risk: invalid value %d", int(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText accepts "safe", "medium", "dangerous" and "unknown" (which
// becomes Medium), case-insensitively. Anything else is an error, so a typo
// in a policy file is reported instead of silently becoming Medium.
func (r *Risk) UnmarshalText(b []byte) error {
	switch strings.ToLower(strings.TrimSpace(string(b))) {
	case "safe":
		*r = Safe
	case "medium", "unknown":
		*r = Medium
	case "dangerous":
		*r = Dangerous
	default:
		return fmt.Errorf("unmarshal risk: unknown tier %q (want safe, medium, dangerous or unknown)", string(b))
	}
	return nil
}
