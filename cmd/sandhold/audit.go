package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
)

type auditCmd struct {
	Remote bool           `help:"Ask the server you logged in to (sandhold login, or SANDHOLD_URL/SANDHOLD_KEY) instead of reading the local data dir."`
	Verify auditVerifyCmd `cmd:"" help:"Check the hash chain; exit 0 when intact, 1 naming the first bad record."`
	Tail   auditTailCmd   `cmd:"" help:"Print the newest records as JSON lines (control and bidi characters shown escaped)."`
}

type auditVerifyCmd struct{}

func (auditVerifyCmd) Run(ctx context.Context, e *env) error {
	if e.global.Audit.Remote {
		return remoteAuditVerify(ctx, e)
	}
	st, lg, _, err := openLocal(ctx, e)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	res, err := lg.Verify(ctx)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("verify: %w", err)}
	}
	if !res.OK {
		return &exitError{code: 1, err: fmt.Errorf("audit chain broken at record %d: %s", res.FirstBad, res.Problem)}
	}
	_, err = fmt.Fprintf(e.stdout, "audit chain intact: %d records, head %d %s\n", res.Records, res.HeadSeq, res.HeadHash)
	return err
}

type auditTailCmd struct {
	N      int    `short:"n" default:"20" help:"How many records."`
	Action string `help:"Only this action or dotted prefix (auth matches auth.*)."`
	Follow bool   `short:"f" help:"Keep printing new records."`
}

// followPoll is how often --follow looks for new records.
const followPoll = time.Second

func (a *auditTailCmd) Run(ctx context.Context, e *env) error {
	if e.global.Audit.Remote {
		return remoteAuditTail(ctx, e, a)
	}
	st, lg, _, err := openLocal(ctx, e)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	recs, err := lg.Query(ctx, audit.Filter{Action: a.Action, Limit: a.N, Descending: true})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	var last int64
	for i := len(recs) - 1; i >= 0; i-- {
		if err := enc.Encode(recs[i].Display()); err != nil {
			return err
		}
		last = recs[i].Seq
	}
	for a.Follow {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
		more, err := lg.Query(ctx, audit.Filter{Action: a.Action, AfterSeq: last})
		if err != nil {
			return err
		}
		for _, r := range more {
			if err := enc.Encode(r.Display()); err != nil {
				return err
			}
			last = r.Seq
		}
	}
	return nil
}
