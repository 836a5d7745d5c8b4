package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/config"
	"github.com/sandhold/sandhold/internal/fault"
)

func TestEveryKindHasAStatus(t *testing.T) {
	kinds := []fault.Kind{fault.Invalid, fault.Unauthorized, fault.Forbidden, fault.NotFound, fault.Conflict,
		fault.TooLarge, fault.RateLimited, fault.Unavailable, fault.Internal, fault.Timeout, fault.Unsupported,
		fault.Misdirected, fault.Unprocessable, fault.MethodNotAllowed, fault.Gone, kindMediaType}
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

// A type whose package is mapped in schemaHomes keeps the schema name of the
// package it maps to, alone and as a generic's argument.
func TestSchemaNamesFollowTheirHome(t *testing.T) {
	auditPath := reflect.TypeOf(audit.Record{}).PkgPath()
	schemaHomes[auditPath] = "logbook"
	t.Cleanup(func() { delete(schemaHomes, auditPath) })
	for _, tc := range []struct {
		v    any
		want string
	}{
		{audit.Record{}, "LogbookRecord"},
		{Envelope[[]audit.Record]{}, "EnvelopeListLogbookRecord"},
		{Envelope[auth.KeyInfo]{}, "EnvelopeAuthKeyInfo"},
	} {
		if got := schemaName(reflect.TypeOf(tc.v), "hint"); got != tc.want {
			t.Errorf("schemaName(%T) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestDefaultBodyCapIsMaxBody(t *testing.T) {
	s, key := newTestServerWith(t, 3<<20)
	type in struct {
		Body struct {
			Blob string `json:"blob"`
		}
	}
	huma.Register(s.API(), huma.Operation{OperationID: "blob", Method: http.MethodPost, Path: "/v1/test-blob"},
		func(_ context.Context, i *in) (*struct{ Body Envelope[int] }, error) {
			return &struct{ Body Envelope[int] }{Body: OK(len(i.Body.Blob))}, nil
		})
	post := func(n int) int {
		body := `{"blob":"` + strings.Repeat("a", n) + `"}`
		req := httptest.NewRequest(http.MethodPost, "/v1/test-blob", strings.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post(2 << 20); code != http.StatusOK {
		t.Fatalf("2 MiB body under a 3 MiB cap: %d", code)
	}
	if code := post(4 << 20); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("4 MiB body over a 3 MiB cap: %d", code)
	}
}

func TestHostAllowed(t *testing.T) {
	tests := []struct {
		name    string
		listen  string
		allowed []string
		host    string
		want    bool
	}{
		{"loopback: localhost", "127.0.0.1:8080", nil, "localhost:8080", true},
		{"loopback: upper case, trailing dot", "127.0.0.1:8080", nil, "LOCALHOST.:8080", true},
		{"loopback: 127.0.0.1 without port", "127.0.0.1:8080", nil, "127.0.0.1", true},
		{"loopback: other loopback ip", "127.0.0.1:8080", nil, "127.0.0.2:8080", true},
		{"loopback: ipv6", "127.0.0.1:8080", nil, "[::1]:8080", true},
		{"loopback: rebinding name", "127.0.0.1:8080", nil, "evil.example:8080", false},
		{"loopback: lan ip", "127.0.0.1:8080", nil, "192.168.1.5:8080", false},
		{"loopback: empty", "127.0.0.1:8080", nil, "", false},
		{"loopback: allowed name", "127.0.0.1:8080", []string{"sandhold.internal"}, "sandhold.internal", true},
		{"loopback: allowed name case", "127.0.0.1:8080", []string{"Sandhold.Internal"}, "sandhold.internal:443", true},
		{"wide bind: ip literal", "0.0.0.0:8080", nil, "10.0.0.7:8080", true},
		{"wide bind: name refused", "0.0.0.0:8080", nil, "evil.example", false},
		{"wide bind: allowed name", "0.0.0.0:8080", []string{"api.example"}, "api.example", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: config.Config{Listen: tc.listen, AllowedHosts: tc.allowed}, loopbackBind: config.IsLoopbackListen(tc.listen)}
			if got := s.hostAllowed(tc.host); got != tc.want {
				t.Fatalf("hostAllowed(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}
