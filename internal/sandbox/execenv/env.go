// Package execenv is the environment a sandbox's processes start with:
// the base every execution starts from and the rule the caller's own
// variables pass (names, no NUL, the loader's and interpreters' hooks
// only for admins).
package execenv

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/sandhold/sandhold/internal/fault"
)

// MaxVars caps the environment entries a caller adds to an execution
// (and a sandbox's spec to all of its executions).
const MaxVars = 256

var name = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// privileged are variables that change how every program loads or runs;
// only admin keys may set them (SECURITY-RULES.md → Exec).
var privileged = map[string]bool{
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "LD_DEBUG_OUTPUT": true,
	"LD_PROFILE": true, "LD_ORIGIN_PATH": true, "GCONV_PATH": true, "HOSTALIASES": true,
	"LOCALDOMAIN": true, "RES_OPTIONS": true, "NLSPATH": true, "MALLOC_CHECK_": true,
	"BASH_ENV": true, "ENV": true, "PYTHONSTARTUP": true, "NODE_OPTIONS": true, "PERL5OPT": true,
}

// Base is the environment every execution starts from; nothing of the
// server's own environment is in it.
func Base() map[string]string {
	return map[string]string{
		"PATH":    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":    "/workspace",
		"USER":    "sandbox",
		"LOGNAME": "sandbox",
		"SHELL":   "/bin/bash",
		"LANG":    "C.UTF-8",
		"LC_ALL":  "C.UTF-8",
		"TERM":    "xterm-256color",
	}
}

// Build merges the caller's variables (at most maxVars; the privileged
// ones only when admin) over env, which it changes, after checking them;
// it returns the environment as NAME=value lines, sorted.
func Build(env, user map[string]string, admin bool, maxVars int) ([]string, error) {
	if len(user) > maxVars {
		return nil, fault.InvalidField("env", fmt.Sprintf("at most %d environment variables", maxVars))
	}
	for k, v := range user {
		if !name.MatchString(k) {
			return nil, fault.InvalidField("env", fmt.Sprintf("environment variable name %q is not valid", k))
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, fault.InvalidField("env", fmt.Sprintf("environment variable %s holds a NUL byte", k))
		}
		if privileged[strings.ToUpper(k)] && !admin {
			return nil, fault.InvalidField("env", fmt.Sprintf("environment variable %s may only be set by admin keys", k))
		}
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}
