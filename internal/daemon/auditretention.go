package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/config"
)

// The audit's retention (SANDBOX_AUDIT_RETENTION, audit.Retain): how often
// a round runs, and how many rounds one tick may run back to back while
// each archives a segment (a log far over its budget catches up in a few
// minutes, not in one long stall).
const (
	auditRetainEvery  = time.Minute
	auditRetainRounds = 20
)

// auditRetention resolves the configured retention: the budget given, or
// config.DefaultAuditBudgetPercent of what the data dir's file system has
// free now plus what the audit holds already (its stored records and
// archives), as the workspaces' default disk budget is derived. Off: no
// bound at all.
func auditRetention(ctx context.Context, cfg config.Config, held func(context.Context) (int64, error)) (audit.Retention, error) {
	r := cfg.AuditRetention
	if r.Off {
		return audit.Retention{}, nil
	}
	out := audit.Retention{MaxAge: r.MaxAge, Budget: r.Budget.Bytes()}
	if out.Budget > 0 {
		return out, nil
	}
	free, err := freeBytes(cfg.DataDir)
	if err != nil {
		return audit.Retention{}, err
	}
	n, err := held(ctx)
	if err != nil {
		return audit.Retention{}, err
	}
	out.Budget = (free + n) / 100 * config.DefaultAuditBudgetPercent
	return out, nil
}

// auditHeld is what the audit takes in the data dir now: its stored
// records (the store's estimate) and its archive files.
func (d *Daemon) auditHeld(ctx context.Context) (int64, error) {
	sz, err := d.store.AuditSize(ctx)
	if err != nil {
		return 0, err
	}
	arch, err := audit.ArchiveBytes(d.cfg.DataDir)
	return sz.Bytes + arch, err
}

// retainAudit runs retention rounds until ctx ends.
func (d *Daemon) retainAudit(ctx context.Context, r audit.Retention) {
	if r == (audit.Retention{}) {
		return
	}
	t := time.NewTicker(auditRetainEvery)
	defer t.Stop()
	for {
		for range auditRetainRounds {
			res, err := d.audit.Retain(ctx, r)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					d.log.Error("audit retention", "err", err)
				}
				break
			}
			for _, f := range res.Dropped {
				d.log.Warn("audit archive deleted to keep the audit's budget", "file", f, "budget_bytes", r.Budget)
			}
			if res.Archived == nil {
				break
			}
			d.log.Info("audit records archived", "from", res.Archived.From, "through", res.Archived.Through,
				"file", res.Archived.File, "reason", res.Archived.Reason)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
