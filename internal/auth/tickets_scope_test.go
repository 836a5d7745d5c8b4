package auth

import (
	"context"
	"testing"

	"github.com/sandhold/sandhold/internal/fault"
)

// A ticket opens only the routes of the scope it was minted for: on a
// route of another scope, or one that takes no ticket, it is refused, and
// a caller that came with a ticket mints no ticket (one leaked ticket must
// not chain into the next).
func TestTicketScopes(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newSvc(t)
	info, _, err := s.CreateKey(ctx, Caller{}, "k", RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	c := Caller{KeyID: info.ID, Role: RoleAgent}
	for _, tc := range []struct {
		name   string
		minted TicketScope
		route  []TicketScope
		ok     bool
	}{
		{"terminal on terminal", ScopeTerminal, []TicketScope{ScopeTerminal}, true},
		{"terminal on cdp", ScopeTerminal, []TicketScope{ScopeCDP}, false},
		{"cdp on vnc", ScopeCDP, []TicketScope{ScopeVNC}, false},
		{"preview on terminal", ScopePreview, []TicketScope{ScopeTerminal}, false},
		{"console on preview", ScopeConsole, []TicketScope{ScopePreview}, false},
		{"vnc on a route taking every scope", ScopeVNC, TicketScopes, true},
		{"terminal on a route taking none (exec, tickets)", ScopeTerminal, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk, _, err := s.IssueTicket(ctx, c, tc.minted)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Authenticate(ctx, "10.0.0.9", Credential{Ticket: tk, Scopes: tc.route})
			if tc.ok != (err == nil) {
				t.Fatalf("redeem: %+v, %v (want ok=%v)", got, err, tc.ok)
			}
			if !tc.ok {
				if fault.KindOf(err) != fault.Unauthorized {
					t.Fatalf("refusal %v, want unauthorized", err)
				}
				// Refused elsewhere, it still opens its own scope once.
				if _, err := s.Authenticate(ctx, "10.0.0.9", Credential{Ticket: tk, Scopes: []TicketScope{tc.minted}}); err != nil {
					t.Fatalf("own scope after a refusal elsewhere: %v", err)
				}
				return
			}
			if got.TicketScope != tc.minted || !got.ViaTicket {
				t.Fatalf("caller %+v, want scope %s", got, tc.minted)
			}
		})
	}

	t.Run("a ticket mints no ticket", func(t *testing.T) {
		tk, _, _ := s.IssueTicket(ctx, c, ScopeTerminal)
		tc, err := s.Authenticate(ctx, "10.0.0.9", Credential{Ticket: tk, Scopes: []TicketScope{ScopeTerminal}})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range TicketScopes {
			if _, _, err := s.IssueTicket(ctx, tc, sc); fault.KindOf(err) != fault.Forbidden {
				t.Fatalf("a ticket caller minted a %s ticket: %v", sc, err)
			}
		}
	})
	t.Run("unknown scope", func(t *testing.T) {
		if _, _, err := s.IssueTicket(ctx, c, "admin"); fault.KindOf(err) != fault.Invalid {
			t.Fatalf("scope admin: %v, want invalid", err)
		}
		if _, _, err := s.IssueTicket(ctx, c, ""); fault.KindOf(err) != fault.Invalid {
			t.Fatalf("no scope: %v, want invalid", err)
		}
	})
}
