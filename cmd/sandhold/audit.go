package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/client"
	"github.com/sandhold/sandhold/internal/store"
)

type auditCmd struct {
	serverFlags `embed:""`
	where       `embed:""`
	Verify      auditVerifyCmd `cmd:"" help:"Check the hash chain; exit 0 when intact, 1 naming the first bad record."`
	Guard       auditGuardCmd  `cmd:"" name:"anchor-guard" help:"Print the SQL a PostgreSQL administrator runs once so that sandhold's role cannot delete or rewind the audit chain's head (SECURITY.md)."`
	Tail        auditTailCmd   `cmd:"" help:"Print the newest records: a table on a terminal, else JSON lines: the stored strings, JSON-escaped (control and bidi characters as \\u escapes)."`
}

type auditVerifyCmd struct {
	Archives bool `help:"Also check the archive files in the data dir (audit-archive/): each named by an anchor in the chain, unchanged, intact, and contiguous up to the stored records."`
}

func (a auditVerifyCmd) Run(ctx context.Context, e *env) error {
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
	if err := printVerify(e.stdout, res); err != nil || !a.Archives {
		return err
	}
	c, err := lg.VerifyArchives(ctx)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("verify archives: %w", err)}
	}
	if !c.OK {
		return &exitError{code: 1, err: fmt.Errorf("audit archives broken: %s", audit.Escape(c.Problem))}
	}
	if c.Files == 0 {
		_, err = fmt.Fprintln(e.stdout, "audit archives: none")
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "audit archives intact: %d files, records %d..%d\n", c.Files, c.From, c.From+c.Records-1)
	return err
}

// printVerify prints a verification (local or the server's): one line
// saying whether the chain is intact, then a line per anchor; exit 1 when
// broken. Every string passes audit.Escape (a remote server's text).
func printVerify(w io.Writer, res audit.Result) error {
	anchors := func() {
		for _, a := range res.Anchors {
			line := fmt.Sprintf("  %s: record %d, %s", audit.Escape(a.Name), a.Seq, audit.Escape(a.State))
			if a.Guarded != nil && *a.Guarded {
				line += "; guarded: " + audit.Escape(a.Guard)
			} else if a.Guarded != nil {
				line += "; not guarded: " + audit.Escape(a.Guard)
			}
			_, _ = fmt.Fprintln(w, line)
		}
	}
	if !res.OK {
		anchors()
		return &exitError{code: 1, err: fmt.Errorf("audit chain broken at record %d: %s", res.FirstBad, audit.Escape(res.Problem))}
	}
	archived := ""
	if res.ArchivedThrough > 0 {
		archived = fmt.Sprintf(" (records 1..%d archived)", res.ArchivedThrough)
	}
	_, err := fmt.Fprintf(w, "audit chain intact: %d records%s, head %d %s\n", res.Records, archived, res.HeadSeq, audit.Escape(res.HeadHash))
	anchors()
	return err
}

type auditGuardCmd struct {
	Role string `required:"" help:"The PostgreSQL role sandhold connects as (the user of SANDBOX_DATABASE_URL)."`
}

func (a auditGuardCmd) Run(_ context.Context, e *env) error {
	_, err := fmt.Fprint(e.stdout, store.PostgresAnchorGuard(a.Role))
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
	print := func(r audit.Record) error {
		if !out.table {
			line, err := audit.JSONLine(r)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(e.stdout, line)
			return err
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
