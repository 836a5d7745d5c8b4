package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The one-time tickets of a cluster live here rather than in one node's
// memory: a browser asks for a ticket through whichever node the load
// balancer picks, and opens its WebSocket through another, which forwards
// it to the node that runs the sandbox. Only the SHA-256 of a ticket is
// stored (as with keys), so the table holds nothing a client could present.

// ticketsLockKey serialises ticket inserts across nodes so the caps hold
// ("tickets" in ASCII, as an int64).
const ticketsLockKey int64 = 0x7469636b657473

// AddTicket stores a ticket's hash for keyID until expires, unless the
// cluster holds maxTotal unexpired tickets, or keyID maxPerKey: then it
// returns false. Expired tickets are swept first.
func (s *Postgres) AddTicket(ctx context.Context, hash []byte, keyID string, expires, now time.Time, maxTotal, maxPerKey int) (bool, error) {
	added := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, ticketsLockKey); err != nil {
			return fmt.Errorf("tickets: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tickets WHERE expires_ns <= $1`, now.UnixNano()); err != nil {
			return fmt.Errorf("tickets: sweep: %w", err)
		}
		var total, mine int
		if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE key_id = $1) FROM tickets`, keyID).Scan(&total, &mine); err != nil {
			return fmt.Errorf("tickets: count: %w", err)
		}
		if total >= maxTotal || mine >= maxPerKey {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tickets(hash, key_id, expires_ns) VALUES ($1, $2, $3)`, hash, keyID, expires.UnixNano()); err != nil {
			return fmt.Errorf("tickets: insert: %w", err)
		}
		added = true
		return nil
	})
	return added && err == nil, err
}

// TakeTicket removes the ticket with this hash and returns its key id if
// it was unexpired at now. One statement: two nodes redeeming the same
// ticket at once cannot both get it.
func (s *Postgres) TakeTicket(ctx context.Context, hash []byte, now time.Time) (string, bool, error) {
	var keyID string
	var expires int64
	err := s.pool.QueryRow(ctx, `DELETE FROM tickets WHERE hash = $1 RETURNING key_id, expires_ns`, hash).Scan(&keyID, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("tickets: take: %w", err)
	}
	if now.UnixNano() >= expires {
		return "", false, nil
	}
	return keyID, true, nil
}

// DropKeyTickets removes every ticket of keyID (a revoked key's).
func (s *Postgres) DropKeyTickets(ctx context.Context, keyID string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM tickets WHERE key_id = $1`, keyID); err != nil {
		return fmt.Errorf("tickets: drop: %w", err)
	}
	return nil
}
