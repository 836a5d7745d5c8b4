package sandbox

import "github.com/sandhold/sandhold/internal/sandbox/execenv"

// BaseEnv is the environment every execution starts from; nothing of the
// server's own environment is in it (execenv.Base).
func BaseEnv() map[string]string { return execenv.Base() }

// BuildEnv merges the caller's variables over BaseEnv after checking them.
func BuildEnv(user map[string]string, privileged bool) ([]string, error) {
	return buildEnv(BaseEnv(), user, privileged)
}

// buildEnv merges the caller's variables over env (which it changes)
// after checking them (execenv.Build): at most maxEnvVars, the variables
// that change how programs load or run only for admins.
func buildEnv(env, user map[string]string, privileged bool) ([]string, error) {
	return execenv.Build(env, user, privileged, maxEnvVars)
}
