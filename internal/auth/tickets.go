package auth

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

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
// the sandbox. Only the SHA-256 of a ticket is stored; TakeTicket removes
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

// add stores a ticket; false when a cap is reached.
func (t *tickets) add(ctx context.Context, text, keyID string, expires, now time.Time) (bool, error) {
	if t.shared != nil {
		h := sha256.Sum256([]byte(text))
		return t.shared.AddTicket(ctx, h[:], keyID, expires, now, maxTickets, maxTicketsPerKey)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	if len(t.byHash) >= maxTickets || t.perKey[keyID] >= maxTicketsPerKey {
		return false, nil
	}
	t.byHash[sha256.Sum256([]byte(text))] = ticket{keyID: keyID, expires: expires}
	t.perKey[keyID]++
	return true, nil
}

// take removes and returns the ticket if it exists and is unexpired.
func (t *tickets) take(ctx context.Context, text string, now time.Time) (string, bool, error) {
	h := sha256.Sum256([]byte(text))
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
