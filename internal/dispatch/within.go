package dispatch

import (
	"context"

	"github.com/sandhold/sandhold/internal/auth"
)

// withinKey marks the context of a tool's run with the dispatcher and the
// caller of the call (see Within).
type withinKey struct{}

type within struct {
	d *Dispatcher
	c auth.Caller
}

// Within returns the dispatcher and the caller of the tool call whose run
// ctx belongs to. A run that must act beyond its own work on the caller's
// behalf — create the caller's default sandbox, start a stopped one,
// submit the lines of a shell's raw input — dispatches that act as a call
// of its own through them (Ref.CallWithin), so HALT, role, policy, rate limit and
// audit apply to it as to any call. Outside a tool's run it reports false:
// such an act is then refused, never done unchecked.
func Within(ctx context.Context) (*Dispatcher, auth.Caller, bool) {
	w, ok := ctx.Value(withinKey{}).(within)
	if !ok || w.d == nil {
		return nil, auth.Caller{}, false
	}
	return w.d, w.c, true
}
