package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/store"
)

func TestCreateKeyWithLimits(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newSvc(t)
	admin := Caller{KeyID: "key_admin", Role: RoleAdmin}
	info, secret, err := s.CreateKeyWithLimits(ctx, admin, "slow", RoleAgent, "command=2/m, code=1/m")
	if err != nil {
		t.Fatal(err)
	}
	if info.RateLimits != "code=1/m:1,command=2/m:2" {
		t.Fatalf("stored limits %q, want the canonical form", info.RateLimits)
	}
	// Authentication carries them to the dispatcher, by key and by ticket.
	c, err := s.Authenticate(ctx, "10.0.0.1", Credential{Key: secret})
	if err != nil || c.RateLimits[ratelimit.Command] != (ratelimit.Rule{PerMinute: 2, Burst: 2}) || len(c.RateLimits) != 2 {
		t.Fatalf("caller = %+v, %v", c, err)
	}
	tk, _, err := s.IssueTicket(ctx, c, ScopePreview)
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := s.Authenticate(ctx, "10.0.0.1", Credential{Ticket: tk, Scopes: []TicketScope{ScopePreview}}); err != nil || tc.RateLimits[ratelimit.Exec].PerMinute != 1 {
		t.Fatalf("ticket caller = %+v, %v", tc, err)
	}
	// Listing shows them.
	list, err := s.ListKeys(ctx)
	if err != nil || len(list) != 1 || list[0].RateLimits != info.RateLimits {
		t.Fatalf("list = %+v, %v", list, err)
	}
	// A key without limits has none.
	_, plain, err := s.CreateKey(ctx, admin, "plain", RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Authenticate(ctx, "10.0.0.1", Credential{Key: plain}); err != nil || c.RateLimits != nil {
		t.Fatalf("plain caller = %+v, %v", c, err)
	}
}

func TestCreateKeyWithLimitsRefusals(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newSvc(t)
	s.maxima = ratelimit.DefaultRules().Merge(ratelimit.Rules{ratelimit.Command: {PerMinute: 100, Burst: 20}})
	admin := Caller{KeyID: "key_admin", Role: RoleAdmin}
	for _, tc := range []struct {
		name, limits string
		by           Caller
		kind         fault.Kind
		msg          string
	}{
		{"above the server", "command=101/m:10", admin, fault.Unprocessable, "above the server's limit command=100/m:20"},
		{"burst above the server", "command=50/m:21", admin, fault.Unprocessable, "above the server's limit"},
		{"not a per-key category", "terminal=1", admin, fault.Unprocessable, "not settable per key"},
		{"garbage", "command", admin, fault.Unprocessable, "want category=N/unit"},
		{"agent", "command=1/m", Caller{KeyID: "k", Role: RoleAgent}, fault.Forbidden, "only an admin"},
		{"viewer", "command=1/m", Caller{KeyID: "k", Role: RoleViewer}, fault.Forbidden, "only an admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.CreateKeyWithLimits(ctx, tc.by, "k", RoleAgent, tc.limits)
			var fe *fault.Error
			if fault.KindOf(err) != tc.kind || !strings.Contains(fault.Public(err), tc.msg) {
				t.Fatalf("err = %v, want %s %q", err, tc.kind, tc.msg)
			}
			if tc.kind == fault.Unprocessable && (!errors.As(err, &fe) || fe.Field != "body.rate_limits") {
				t.Fatalf("field of %v", err)
			}
		})
	}
	if ks, _ := s.ListKeys(ctx); len(ks) != 0 {
		t.Fatalf("a refused key was stored: %+v", ks)
	}
}

// A stored row whose limits do not parse refuses the key: it must not run
// without the limits an admin gave it.
func TestCorruptKeyLimitsRefuseTheKey(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newSvc(t)
	secret, _ := GenerateKey()
	if err := s.st.CreateKey(ctx, store.Key{ID: "key_x", Name: "x", Role: "agent", Hash: HashKey(secret), RateLimits: "command=lots"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "10.0.0.1", Credential{Key: secret}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("corrupt limits: %v", err)
	}
}
