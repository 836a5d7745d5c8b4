// Package cluster makes the sandhold nodes that share one PostgreSQL store
// act as one server: what an operator changes on one node (a HALT, the
// policy, custom tools) is in force on every node within a notification's
// round trip. Approvals need no following either: with a shared store they
// live in it (approvals.Options.Shared), read and written under one lock.
//
// It guards against split brain on the operator's emergency controls: a
// HALT made through one node must not leave agents running unhindered on
// another. Each node follows the store's change notifications
// (store.Postgres.WatchChanges, LISTEN/NOTIFY) and re-reads the setting
// that changed; after the notification connection is lost and restored it
// re-reads every setting it follows, since notifications in between are
// gone.
//
// Keys need no following: every request looks its key up in the shared
// store, so a revocation on one node is refused on all at the next request.
package cluster

import (
	"context"
	"log/slog"
	"sort"

	"github.com/sandhold/sandhold/internal/store"
)

// Changes is the store's side: a stream of change notifications.
type Changes interface {
	WatchChanges(ctx context.Context, fn func(channel, payload string))
}

// Reloader re-reads one setting from the store and puts it in force.
type Reloader func(ctx context.Context) error

// Follow applies changes made by any node to the settings in reload (by
// setting key) until ctx ends; the returned channel is closed when it has
// stopped. A reload that fails is logged and leaves that setting as it was
// (control.Refresh and policy.Reload never loosen on a state they cannot
// read); the next notification or resync tries again.
func Follow(ctx context.Context, src Changes, log *slog.Logger, reload map[string]Reloader) <-chan struct{} {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	keys := make([]string, 0, len(reload))
	for k := range reload {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	apply := func(key string) {
		fn, ok := reload[key]
		if !ok {
			return
		}
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			log.Error("cluster: apply a change made on another node", "setting", key, "err", err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		src.WatchChanges(ctx, func(channel, payload string) {
			switch channel {
			case store.ChannelSettings:
				apply(payload)
			case store.ChannelResync:
				for _, k := range keys {
					apply(k)
				}
			}
		})
	}()
	return done
}
