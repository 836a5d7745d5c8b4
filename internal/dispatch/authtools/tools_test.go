package authtools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/dispatch/authtools"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/store"
)

// TestKeyAndTicketToolsAreTyped: the key and ticket tools are Define'd in
// their capability's home, answer typed values, read arguments strictly
// and keep agents away from keys.
func TestKeyAndTicketToolsAreTyped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	svc := auth.NewService(st, audit.New(st, dir))
	d := dispatch.New(dispatch.Options{})
	for _, tl := range authtools.Tools(svc) {
		if !tl.Typed() {
			t.Errorf("%s is not declared with dispatch.Define", tl.Name)
		}
		d.MustRegister(tl)
	}
	admin := auth.Caller{KeyID: "key_admin", Role: auth.RoleAdmin}
	agent := auth.Caller{KeyID: "key_agent", Role: auth.RoleAgent}

	ks, err := authtools.ToolKeysList.Call(ctx, d, admin, struct{}{})
	if err != nil || ks == nil {
		t.Fatalf("keys.list on an empty store: %v, %v (want an empty list, not null)", ks, err)
	}
	k, err := authtools.ToolKeysCreate.Call(ctx, d, admin, auth.KeyCreateArgs{Name: "ci", Role: "agent"})
	if err != nil || k.Key == "" || k.Role != auth.RoleAgent {
		t.Fatalf("keys.create: %+v, %v", k, err)
	}
	if _, err := d.Call(ctx, admin, authtools.ToolKeysCreate.Name(), json.RawMessage(`{"name":"x","role":"agent","admin":true}`)); fault.KindOf(err) != fault.Invalid {
		t.Fatalf("an unknown field: %v, want it refused", err)
	}
	if _, err := authtools.ToolKeysList.Call(ctx, d, agent, struct{}{}); fault.KindOf(err) != fault.Forbidden {
		t.Fatalf("agent listing keys: %v, want forbidden", err)
	}
	tk, err := authtools.ToolTicketsCreate.Call(ctx, d, agent, auth.TicketArgs{Scope: "terminal"})
	if err != nil || tk.Ticket == "" || tk.Scope != "terminal" || tk.ExpiresAt.IsZero() {
		t.Fatalf("tickets.create: %+v, %v", tk, err)
	}
	info, err := authtools.ToolKeysRevoke.Call(ctx, d, admin, auth.KeyIDArgs{ID: k.ID})
	if err != nil || info.RevokedAt == nil {
		t.Fatalf("keys.revoke: %+v, %v", info, err)
	}
}
