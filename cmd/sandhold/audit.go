package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/client"
)

type auditCmd struct {
	serverFlags `embed:""`
	where       `embed:""`
	Verify      auditVerifyCmd `cmd:"" help:"Check the hash chain; exit 0 when intact, 1 naming the first bad record."`
	Tail        auditTailCmd   `cmd:"" help:"Print the newest records: a table on a terminal, else JSON lines (control and bidi characters shown escaped)."`
}

type auditVerifyCmd struct{}

func (auditVerifyCmd) Run(ctx context.Context, e *env) error {
	ac := e.global.Audit
	remote, err := ac.remote(ac.serverFlags)
	if err != nil {
		return err
	}
	if remote {
		return remoteAuditVerify(ctx, e)
	}
	st, lg, _, err := openLocal(ctx, e, ac.serverFlags, false)
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
	N      int    `short:"n" default:"20" help:"How many records (the server sends at most 1000)."`
	Action string `help:"Only this action or dotted prefix (auth matches auth.*)."`
	Follow bool   `short:"f" help:"Keep printing new records."`
	Format string `enum:"auto,table,json" default:"auto" help:"table, json (one record per line), or auto: a table on a terminal, else json."`
}

// followPoll is how often --follow looks for new records.
const followPoll = time.Second

func (a *auditTailCmd) Run(ctx context.Context, e *env) error {
	ac := e.global.Audit
	remote, err := ac.remote(ac.serverFlags)
	if err != nil {
		return err
	}
	out := newAuditPrinter(e.stdout, a.Format == "table" || (a.Format == "auto" && isTTY(e.stdout)))
	if remote {
		return remoteAuditTail(ctx, a, out)
	}
	st, lg, _, err := openLocal(ctx, e, ac.serverFlags, false)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	recs, err := lg.Query(ctx, audit.Filter{Action: a.Action, Limit: a.N, Descending: true})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	print := func(r audit.Record) error {
		if !out.table {
			return enc.Encode(r.Display())
		}
		cr, err := clientRecord(r)
		if err != nil {
			return err
		}
		return out.print(cr)
	}
	var last int64
	for i := len(recs) - 1; i >= 0; i-- {
		if err := print(recs[i]); err != nil {
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
			if err := print(r); err != nil {
				return err
			}
			last = r.Seq
		}
	}
	return nil
}

// clientRecord is a local record in the shape the server sends, for the
// one table renderer (its cells escaped by client.Escape).
func clientRecord(r audit.Record) (client.AuditRecord, error) {
	var cr client.AuditRecord
	b, err := json.Marshal(r)
	if err == nil {
		err = json.Unmarshal(b, &cr)
	}
	return cr, err
}
