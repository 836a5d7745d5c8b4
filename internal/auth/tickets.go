package auth

import (
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

// tickets holds outstanding one-time tickets by SHA-256 of their text.
type tickets struct {
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
func (t *tickets) add(text, keyID string, expires, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	if len(t.byHash) >= maxTickets || t.perKey[keyID] >= maxTicketsPerKey {
		return false
	}
	t.byHash[sha256.Sum256([]byte(text))] = ticket{keyID: keyID, expires: expires}
	t.perKey[keyID]++
	return true
}

// take removes and returns the ticket if it exists and is unexpired.
func (t *tickets) take(text string, now time.Time) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := sha256.Sum256([]byte(text))
	tk, ok := t.byHash[h]
	if !ok {
		return "", false
	}
	t.remove(h, tk)
	if !now.Before(tk.expires) {
		return "", false
	}
	return tk.keyID, true
}

// dropKey forgets every ticket of a revoked key.
func (t *tickets) dropKey(keyID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for h, tk := range t.byHash {
		if tk.keyID == keyID {
			t.remove(h, tk)
		}
	}
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
