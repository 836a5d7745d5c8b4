package cluster

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sandhold/sandhold/internal/store"
)

// A node holds its name by a lease in the store (store.Store.HoldNode):
// taken before the server touches a sandbox record, renewed here, given up
// at a clean stop. LeaseTTL is DeadAfter, so a node that stops renewing
// frees its name just when the other nodes count it dead; RenewEvery is
// HeartbeatEvery, five renewals per TTL, so a slow store or a loaded host
// does not lose the name over one late renewal.
const (
	LeaseTTL   = DeadAfter
	RenewEvery = HeartbeatEvery
)

// KeepLease renews l every RenewEvery until ctx ends. When another server
// has taken the node (store.ErrNodeLost: this one could not renew for a
// TTL) it calls lost and returns: the server must stop serving, or two
// servers would run one node's sandboxes. Other failures (the store out of
// reach) are logged and retried; they become ErrNodeLost only if another
// server takes the name meanwhile.
func KeepLease(ctx context.Context, l store.Lease, log *slog.Logger, lost func(error)) {
	t := time.NewTicker(RenewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.Renew(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, store.ErrNodeLost):
			lost(err)
			return
		default:
			log.Warn("cluster: renew this node's lease", "err", err)
		}
	}
}
