package spawnfault

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

// TestSpawnErrorsReachClientsAsTheirCause: every init answer a caller's
// input or the sandbox's state can cause is a client error naming it (the
// process limit with its figure and a Retry-After); a lost init is
// unavailable; anything else stays what it was (internal).
func TestSpawnErrorsReachClientsAsTheirCause(t *testing.T) {
	tests := []struct {
		code  string
		kind  fault.Kind
		field string
		retry bool
		says  string
	}{
		{"ENOENT", fault.Invalid, "", false, "command not found"},
		{"ENOTDIR", fault.Invalid, "cwd", false, "not a directory"},
		{"ELOOP", fault.Invalid, "cwd", false, "not a directory"},
		{"EACCES", fault.Forbidden, "", false, "permission denied"},
		{"EPERM", fault.Forbidden, "", false, "permission denied"},
		{"EAGAIN", fault.RateLimited, "", true, "process limit (pids 40)"},
		{"ENOMEM", fault.Unavailable, "", false, "out of memory"},
		{agent.CodePTYLimit, fault.RateLimited, "", true, "SANDBOX_MAX_PTYS"},
		{agent.CodePTYHost, fault.Unavailable, "", true, "no terminal is free"},
		{agent.CodeInvalid, fault.Invalid, "", false, "bad request"},
	}
	for _, tc := range tests {
		err := Of(fmt.Errorf("spawn: %w", &agent.Error{Code: tc.code, Msg: "bad request"}), 40)
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Kind != tc.kind || fe.Field != tc.field || (fe.RetryAfter > 0) != tc.retry || !strings.Contains(fe.Error(), tc.says) {
			t.Errorf("%s: got %#v, want kind %v field %q retry %v saying %q", tc.code, err, tc.kind, tc.field, tc.retry, tc.says)
		}
	}
	var fe *fault.Error
	if err := Of(fmt.Errorf("spawn: %w", agent.ErrGone), 40); !errors.As(err, &fe) || fe.Kind != fault.Unavailable {
		t.Errorf("a lost init: %v", err)
	}
	other := errors.New("something else")
	if err := Of(other, 40); !errors.Is(err, other) || err.Error() != other.Error() {
		t.Errorf("another error became %v", err)
	}
}
