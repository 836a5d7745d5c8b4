// Package spawnfault says what a failed spawn in a sandbox (a command, a
// long-lived process) means to the client that asked for it: the init's
// errno or code, mapped onto the error kinds of internal/fault.
package spawnfault

import (
	"errors"
	"fmt"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

// pidsRetry is the Retry-After of a sandbox at its process limit: a
// polling interval, as nobody knows when the sandbox's processes end.
const pidsRetry = 2 * time.Second

// Of maps what the init answered to a failed spawn onto the error kinds
// clients see; pids is the sandbox's process limit, which a fork that
// failed with EAGAIN reached. Every errno a caller's input or the
// sandbox's state can cause is a 4xx naming the cause; only what is left
// is internal.
func Of(err error, pids int64) error {
	var pe *agent.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case "ENOENT":
			return fault.Wrap(fault.Invalid, err, "command not found or cwd does not exist")
		case "ENOTDIR", "ELOOP", "ENAMETOOLONG":
			// chdir to the cwd (or the command's path) failed: the
			// caller named something that is not a usable directory.
			return &fault.Error{Kind: fault.Invalid, Field: "cwd", Msg: "cwd is not a directory, or the command path is not valid", Err: err}
		case "EACCES", "EPERM":
			return fault.Wrap(fault.Forbidden, err, "permission denied")
		case "EAGAIN":
			// fork failed: the user group is at its pids limit (the
			// only limit that makes fork answer EAGAIN here).
			return &fault.Error{Kind: fault.RateLimited, RetryAfter: int(pidsRetry / time.Second), Err: err,
				Msg: fmt.Sprintf("the sandbox is at its process limit (pids %d): retry when its commands end, or close sessions", pids)}
		case "ENOMEM":
			return fault.Wrap(fault.Unavailable, err, "the sandbox is out of memory (its memory limit)")
		case agent.CodePTYLimit:
			// The sandbox's own devpts is full: its sessions and
			// programs hold every terminal it may have.
			return &fault.Error{Kind: fault.RateLimited, RetryAfter: int(pidsRetry / time.Second), Err: err,
				Msg: "the sandbox has all its terminals open (SANDBOX_MAX_PTYS): close a shell session or a terminal in it"}
		case agent.CodePTYHost:
			return &fault.Error{Kind: fault.Unavailable, RetryAfter: int(pidsRetry / time.Second), Err: err,
				Msg: "no terminal is free on this host: retry later"}
		case agent.CodeInvalid:
			return fault.Wrap(fault.Invalid, err, pe.Msg)
		}
	}
	if errors.Is(err, agent.ErrGone) {
		return fault.Wrap(fault.Unavailable, err, "the sandbox stopped")
	}
	return err
}
