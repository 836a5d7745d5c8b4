package api

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

func TestEveryKindHasAStatus(t *testing.T) {
	kinds := []fault.Kind{fault.Invalid, fault.Unauthorized, fault.Forbidden, fault.NotFound, fault.Conflict,
		fault.TooLarge, fault.RateLimited, fault.Unavailable, fault.Internal, fault.Timeout, fault.Unsupported,
		fault.Misdirected, fault.Unprocessable, fault.MethodNotAllowed}
	seen := map[int]fault.Kind{}
	for _, k := range kinds {
		s, ok := kindStatus[k]
		if !ok {
			t.Errorf("kind %s has no status", k)
			continue
		}
		if other, dup := seen[s]; dup {
			t.Errorf("kinds %s and %s share status %d", k, other, s)
		}
		seen[s] = k
		if back := kindOfStatus(s); back != k {
			t.Errorf("status %d maps back to %s, want %s", s, back, k)
		}
	}
	if StatusOf("bogus") != http.StatusInternalServerError {
		t.Error("unknown kind is not 500")
	}
}

func TestSchemaNames(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{audit.Record{}, "AuditRecord"},
		{Envelope[[]auth.KeyInfo]{}, "EnvelopeListAuthKeyInfo"},
		{Envelope[HealthData]{}, "EnvelopeHealthData"},
		{&ErrorBody{}, "ErrorBody"},
		{Envelope[int]{}, "EnvelopeInt"},
	}
	for _, tc := range tests {
		if got := schemaName(reflect.TypeOf(tc.v), "hint"); got != tc.want {
			t.Errorf("schemaName(%T) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
