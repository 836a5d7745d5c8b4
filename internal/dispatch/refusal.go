package dispatch

import (
	"errors"
	"time"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
)

// argsRefusal is the dispatcher's refusal of a call's arguments: they
// broke their type's rules (Validate) or could not be decoded. It wraps
// the rule's own error (its fault Kind, field and message are the
// answer's) and marks it as the dispatcher's, so an edge can tell it from
// the same kind of error a tool's run returns — AIO answers the one as a
// 422 and the other, on some rows, as the tool's failure — without
// checking the arguments a second time.
type argsRefusal struct {
	tool string
	err  error
}

func (e argsRefusal) Error() string { return e.err.Error() }
func (e argsRefusal) Unwrap() error { return e.err }

// ArgsRefused reports whether err is the dispatcher's refusal of the
// arguments of a call of tool — that call's own, not one a tool's run
// made of another tool and returned.
func ArgsRefused(err error, tool string) bool {
	var r argsRefusal
	return errors.As(err, &r) && r.tool == tool
}

// CapRefusal is the 429 of a concurrency cap a capability enforces itself
// (the sandboxes per key, the executions per sandbox), shaped like the
// dispatcher's rate-limit refusals so the API sets the same headers: limit
// is the cap, retry the hint, msg the answer's message.
func CapRefusal(cat ratelimit.Category, limit int, retry time.Duration, msg string) error {
	d := ratelimit.Decision{Limit: limit, Remaining: 0, Reset: time.Now().Add(retry), RetryAfter: retry}
	return &fault.Error{Kind: fault.RateLimited, Msg: msg, RetryAfter: d.RetryAfterSeconds(),
		Err: &RateLimited{Category: cat, Decision: d}}
}
