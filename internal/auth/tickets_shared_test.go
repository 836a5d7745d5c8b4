package auth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/store"
)

// sharedStore is a store that also holds tickets, as store.Postgres does
// for the nodes of a cluster (its own test covers the SQL).
type sharedStore struct {
	store.Store
	mu   sync.Mutex
	down bool
	m    map[string]ticket
}

func (s *sharedStore) AddTicket(_ context.Context, hash []byte, keyID string, expires, _ time.Time, _, _ int) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return false, errors.New("store down")
	}
	s.m[string(hash)] = ticket{keyID: keyID, expires: expires}
	return true, nil
}

func (s *sharedStore) TakeTicket(_ context.Context, hash []byte, now time.Time) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return "", false, errors.New("store down")
	}
	tk, ok := s.m[string(hash)]
	delete(s.m, string(hash))
	return tk.keyID, ok && now.Before(tk.expires), nil
}

func (s *sharedStore) DropKeyTickets(_ context.Context, keyID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, tk := range s.m {
		if tk.keyID == keyID {
			delete(s.m, h)
		}
	}
	return nil
}

// Two services on one shared store (two nodes): a ticket issued by one is
// redeemed by the other, once; a revocation on either drops it; a store
// that does not answer fails closed.
func TestTicketsSharedAcrossNodes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sh := &sharedStore{Store: st, m: map[string]ticket{}}
	lg := audit.New(st, dir)
	a, b := NewService(sh, lg), NewService(sh, lg)
	info, _, err := a.CreateKey(ctx, Caller{}, "k", RoleAgent)
	if err != nil {
		t.Fatal(err)
	}
	c := Caller{KeyID: info.ID, Role: RoleAgent}
	tk, _, err := a.IssueTicket(ctx, c, ScopeTerminal)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Authenticate(ctx, "10.0.0.1", Credential{Ticket: tk, Scopes: []TicketScope{ScopeTerminal}})
	if err != nil || got.KeyID != info.ID || !got.ViaTicket {
		t.Fatalf("a ticket from node a redeemed on node b: %+v %v", got, err)
	}
	if _, err := a.Authenticate(ctx, "10.0.0.1", Credential{Ticket: tk, Scopes: []TicketScope{ScopeTerminal}}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("second use on the issuing node: %v", err)
	}

	tk2, _, _ := a.IssueTicket(ctx, c, ScopeTerminal)
	if _, err := b.RevokeKey(ctx, Caller{}, info.ID); err != nil {
		t.Fatal(err)
	}
	if len(sh.m) != 0 {
		t.Fatalf("a revocation on b left %d tickets in the shared store", len(sh.m))
	}
	if _, err := a.Authenticate(ctx, "10.0.0.1", Credential{Ticket: tk2, Scopes: []TicketScope{ScopeTerminal}}); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("ticket of a key revoked on another node: %v", err)
	}

	info2, _, _ := a.CreateKey(ctx, Caller{}, "k2", RoleAgent)
	tk3, _, _ := a.IssueTicket(ctx, Caller{KeyID: info2.ID, Role: RoleAgent}, ScopeTerminal)
	sh.mu.Lock()
	sh.down = true
	sh.mu.Unlock()
	if _, err := b.Authenticate(ctx, "10.0.0.1", Credential{Ticket: tk3, Scopes: []TicketScope{ScopeTerminal}}); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("redeem with the store down: %v, want unavailable", err)
	}
	if _, _, err := a.IssueTicket(ctx, Caller{KeyID: info2.ID, Role: RoleAgent}, ScopeTerminal); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("issue with the store down: %v, want unavailable", err)
	}
}
