package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sandhold/sandhold/internal/client"
)

// remoteAuditVerify is `sandhold audit --remote verify`: the server
// verifies its chain (admin and viewer keys); exit 1 when broken.
func remoteAuditVerify(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	v, err := c.AuditVerify(ctx)
	if err != nil {
		return err
	}
	if !v.OK {
		return &exitError{code: 1, err: fmt.Errorf("audit chain broken at record %d: %s", v.FirstBad, client.Escape(v.Problem))}
	}
	_, err = fmt.Fprintf(e.stdout, "audit chain intact: %d records, head %d %s\n", v.Records, v.HeadSeq, client.Escape(v.HeadHash))
	return err
}

// remoteAuditTail is `sandhold audit --remote tail`: the newest records
// (agents: their own) as JSON lines whose control and format characters
// are \u-escaped, or with --follow as they come. Nothing a caller put in
// a record reaches the terminal raw.
func remoteAuditTail(ctx context.Context, e *env, a *auditTailCmd) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	recs, err := c.Audit(ctx, client.AuditFilter{Action: a.Action, Limit: a.N, Newest: true})
	if err != nil {
		return err
	}
	var last int64
	print := func(r client.AuditRecord) error {
		line, err := client.AuditJSON(r)
		if err != nil {
			return err
		}
		last = max(last, r.Seq)
		_, err = fmt.Fprintln(e.stdout, line)
		return err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if err := print(recs[i]); err != nil {
			return err
		}
	}
	for a.Follow {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
		more, err := c.Audit(ctx, client.AuditFilter{Action: a.Action, After: last})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, r := range more {
			if err := print(r); err != nil {
				return err
			}
		}
	}
	return nil
}
