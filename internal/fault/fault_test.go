package fault

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestKindOfAndPublic(t *testing.T) {
	cause := errors.New("open /var/lib/sandhold/x: permission denied")
	tests := []struct {
		name   string
		err    error
		kind   Kind
		public string
		field  string
		retry  int
	}{
		{"nil", nil, "", "", "", 0},
		{"plain error is internal and hidden", cause, Internal, "internal error", "", 0},
		{"wrapped plain error", fmt.Errorf("ctx: %w", os.ErrNotExist), Internal, "internal error", "", 0},
		{"new", New(NotFound, "no such sandbox"), NotFound, "no such sandbox", "", 0},
		{"errorf", Errorf(Conflict, "sandbox %q is paused", "sb1"), Conflict, `sandbox "sb1" is paused`, "", 0},
		{"wrap keeps cause private", Wrap(Unavailable, cause, "store unavailable"), Unavailable, "store unavailable", "", 0},
		{"wrapped fault", fmt.Errorf("handler: %w", New(Forbidden, "admins only")), Forbidden, "admins only", "", 0},
		{"field", InvalidField("body.name", "name too long"), Invalid, "name too long", "body.name", 0},
		{"retry", WithRetryAfter(RateLimited, 60, "slow down"), RateLimited, "slow down", "", 60},
		{"empty message falls back to kind", New(Timeout, ""), Timeout, "timeout", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if k := KindOf(tc.err); k != tc.kind {
				t.Errorf("KindOf = %q, want %q", k, tc.kind)
			}
			if p := Public(tc.err); p != tc.public {
				t.Errorf("Public = %q, want %q", p, tc.public)
			}
			if f := FieldOf(tc.err); f != tc.field {
				t.Errorf("FieldOf = %q", f)
			}
			if r := RetryAfterOf(tc.err); r != tc.retry {
				t.Errorf("RetryAfterOf = %d", r)
			}
		})
	}
}

func TestWrapUnwraps(t *testing.T) {
	err := Wrap(Internal, os.ErrPermission, "could not write")
	if !errors.Is(err, os.ErrPermission) {
		t.Fatal("cause lost")
	}
	if !Is(err, Internal) || Is(nil, Internal) {
		t.Fatal("Is")
	}
	wrapped := Errorf(Invalid, "bad input: %w", os.ErrInvalid)
	if !errors.Is(wrapped, os.ErrInvalid) {
		t.Fatal("Errorf %w cause lost")
	}
}
