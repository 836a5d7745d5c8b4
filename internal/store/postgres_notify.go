package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channels of the change notifications a Postgres store sends (NOTIFY) so
// that every node sees a change made on one within a round trip instead of
// a poll interval.
const (
	// ChannelSettings carries the key of a setting just written (policy,
	// HALT state, custom tools).
	ChannelSettings = "sandhold_settings"
	// ChannelKeys carries the id of a key just revoked.
	ChannelKeys = "sandhold_keys"
	// ChannelResync is never sent by the database: WatchChanges reports it
	// each time it starts listening (the first time and after a lost
	// connection), when changes may have been missed, so the receiver
	// re-reads everything it follows.
	ChannelResync = "sandhold_resync"
)

// watchBackoff is the pause between reconnection attempts of WatchChanges.
const watchBackoff = 500 * time.Millisecond

// WatchChanges calls fn for every change notification on ChannelSettings
// and ChannelKeys, from any node (this one included), until ctx ends. It
// holds one connection of its own for LISTEN. Each time it starts listening
// it first calls fn(ChannelResync, ""): changes made before (between the
// receiver's first read and now, or while a failed connection was being
// replaced) sent no notification it could see, so the receiver must re-read
// its state. fn runs on the
// watching goroutine: a slow fn delays later notifications, not the store.
func (s *Postgres) WatchChanges(ctx context.Context, fn func(channel, payload string)) {
	for ctx.Err() == nil {
		err := s.watchOnce(ctx, func() { fn(ChannelResync, "") }, fn)
		if ctx.Err() != nil {
			return
		}
		_ = err // the caller sees the effect (a resync); retry after a pause
		select {
		case <-ctx.Done():
			return
		case <-time.After(watchBackoff):
		}
	}
}

func (s *Postgres) watchOnce(ctx context.Context, listening func(), fn func(channel, payload string)) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The LISTEN connection leaves the pool for good: a pooled connection
	// handed to someone else would carry our subscriptions with it.
	conn := pc.Hijack()
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	for _, ch := range []string{ChannelSettings, ChannelKeys} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return fmt.Errorf("wait for notification: %w", err)
		}
		fn(n.Channel, n.Payload)
	}
}
