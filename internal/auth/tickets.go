package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"time"
)

// TicketScope names the routes a one-time ticket opens. It is fixed when
// the ticket is minted and bound into what is stored (ticketHash): a
// ticket presented on a route of another scope matches nothing, so a
// leaked terminal ticket cannot run a command, read a sandbox or mint the
// next ticket — no route that mints tickets takes one (IssueTicket also
// refuses a caller that came with a ticket).
type TicketScope string

// The scopes, each with the routes that take it (internal/api's
// ticketScopes table is the authority for the HTTP routes).
const (
	// ScopeTerminal opens a shell's terminal WebSocket (/v1/shell/ws).
	ScopeTerminal TicketScope = "terminal"
	// ScopeCDP opens the DevTools relay (/sandboxes/{id}/cdp/…).
	ScopeCDP TicketScope = "cdp"
	// ScopeVNC opens the desktop's VNC relay (…/vnc/websockify).
	ScopeVNC TicketScope = "vnc"
	// ScopePreview opens the preview proxy of a sandbox's own servers
	// (…/proxy/{port}/…, …/absproxy/{port}/…, and the content origin's
	// {port}-{id} hosts, where it starts a content session).
	ScopePreview TicketScope = "preview"
	// ScopeConsole signs a browser in to the web console
	// (POST /console/session {"ticket": …}) without the key entering it.
	ScopeConsole TicketScope = "console"
)

// TicketScopes are every scope, in a fixed order.
var TicketScopes = []TicketScope{ScopeTerminal, ScopeCDP, ScopeVNC, ScopePreview, ScopeConsole}

// ParseTicketScope validates a scope name.
func ParseTicketScope(s string) (TicketScope, error) {
	for _, sc := range TicketScopes {
		if string(sc) == s {
			return sc, nil
		}
	}
	names := make([]string, len(TicketScopes))
	for i, sc := range TicketScopes {
		names[i] = string(sc)
	}
	return "", fmt.Errorf("unknown ticket scope %q (want one of %s)", s, strings.Join(names, ", "))
}

// ticketHash is what the ticket tables hold for a ticket of scope: the
// SHA-256 of the scope, a NUL and the ticket's text. The scope is part of
// the stored identity, so the same text presented for another scope is an
// unknown ticket (and stays unspent for its own).
func ticketHash(scope TicketScope, text string) [32]byte {
	return sha256.Sum256([]byte(string(scope) + "\x00" + text))
}

// Ticket limits.
const (
	// TicketTTL is how long a ticket can be redeemed.
	TicketTTL = 30 * time.Second
	// maxTickets bounds outstanding tickets in total and maxTicketsPerKey
	// per key, so a key cannot exhaust server memory by minting tickets.
	maxTickets       = 10000
	maxTicketsPerKey = 100
)

// SharedTickets is a store that holds the one-time tickets of a cluster
// (store.Postgres): a ticket minted through one node must open a
// WebSocket through any other, which forwards it to the node that runs
// the sandbox. Only a SHA-256 over a ticket and its scope is stored
// (ticketHash); TakeTicket removes
// it in one step, so a ticket is single use across nodes.
type SharedTickets interface {
	AddTicket(ctx context.Context, hash []byte, keyID string, expires, now time.Time, maxTotal, maxPerKey int) (bool, error)
	TakeTicket(ctx context.Context, hash []byte, now time.Time) (keyID string, ok bool, err error)
	DropKeyTickets(ctx context.Context, keyID string) error
}

// tickets holds outstanding one-time tickets by SHA-256 of their text: in
// memory on one host, in the shared store on a cluster.
type tickets struct {
	// shared, when set, holds the tickets instead of byHash.
	shared SharedTickets

	mu     sync.Mutex
	byHash map[[32]byte]ticket
	perKey map[string]int
}

type ticket struct {
	keyID   string
	expires time.Time
}

func newTickets() *tickets {
	return &tickets{byHash: map[[32]byte]ticket{}, perKey: map[string]int{}}
}

// add stores a ticket of scope; false when a cap is reached.
func (t *tickets) add(ctx context.Context, scope TicketScope, text, keyID string, expires, now time.Time) (bool, error) {
	h := ticketHash(scope, text)
	if t.shared != nil {
		return t.shared.AddTicket(ctx, h[:], keyID, expires, now, maxTickets, maxTicketsPerKey)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	if len(t.byHash) >= maxTickets || t.perKey[keyID] >= maxTicketsPerKey {
		return false, nil
	}
	t.byHash[h] = ticket{keyID: keyID, expires: expires}
	t.perKey[keyID]++
	return true, nil
}

// take removes and returns the ticket of scope if it exists and is
// unexpired.
func (t *tickets) take(ctx context.Context, scope TicketScope, text string, now time.Time) (string, bool, error) {
	h := ticketHash(scope, text)
	if t.shared != nil {
		return t.shared.TakeTicket(ctx, h[:], now)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, ok := t.byHash[h]
	if !ok {
		return "", false, nil
	}
	t.remove(h, tk)
	if !now.Before(tk.expires) {
		return "", false, nil
	}
	return tk.keyID, true, nil
}

// dropKey forgets every ticket of a revoked key.
func (t *tickets) dropKey(ctx context.Context, keyID string) error {
	if t.shared != nil {
		return t.shared.DropKeyTickets(ctx, keyID)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for h, tk := range t.byHash {
		if tk.keyID == keyID {
			t.remove(h, tk)
		}
	}
	return nil
}

// sweep drops expired tickets. Caller holds mu.
func (t *tickets) sweep(now time.Time) {
	for h, tk := range t.byHash {
		if !now.Before(tk.expires) {
			t.remove(h, tk)
		}
	}
}

// remove deletes one ticket. Caller holds mu.
func (t *tickets) remove(h [32]byte, tk ticket) {
	delete(t.byHash, h)
	if t.perKey[tk.keyID]--; t.perKey[tk.keyID] <= 0 {
		delete(t.perKey, tk.keyID)
	}
}
