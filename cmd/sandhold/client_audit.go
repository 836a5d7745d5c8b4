package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandhold/sandhold/internal/audit"
	"github.com/sandhold/sandhold/internal/client"
)

// remoteAuditVerify is `sandhold audit verify` against the server: it
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
	return printVerify(e.stdout, audit.Result(v))
}

// remoteAuditTail is `sandhold audit tail` against the server: the newest
// records (agents: their own), or with --follow as they come. Nothing a
// caller put in a record reaches the terminal raw.
func remoteAuditTail(ctx context.Context, a *auditTailCmd, out *auditPrinter) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	recs, err := c.Audit(ctx, client.AuditFilter{Action: a.Action, Limit: a.N, Newest: true})
	if err != nil {
		return flagErr(err, map[string]string{"limit": "-n", "action": "--action"})
	}
	var last int64
	for i := len(recs) - 1; i >= 0; i-- {
		if err := out.print(recs[i]); err != nil {
			return err
		}
		last = max(last, recs[i].Seq)
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
			if err := out.print(r); err != nil {
				return err
			}
			last = max(last, r.Seq)
		}
	}
	return nil
}

// auditPrinter writes records as a table (fixed columns, so --follow's
// lines line up) or as JSON lines.
type auditPrinter struct {
	w      io.Writer
	table  bool
	header bool
}

func newAuditPrinter(w io.Writer, table bool) *auditPrinter {
	return &auditPrinter{w: w, table: table}
}

// Column widths of the table; a longer cell is cut with "…".
const (
	colActor   = 16
	colAction  = 22
	colSandbox = 18
	colVerdict = 9
	colTarget  = 60
)

func (p *auditPrinter) print(r client.AuditRecord) error {
	if !p.table {
		line, err := client.AuditJSON(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(p.w, line)
		return err
	}
	row := "%6s  %-19s  %-*s  %-*s  %-*s  %-*s  %s\n"
	if !p.header {
		p.header = true
		if _, err := fmt.Fprintf(p.w, row, "SEQ", "TIME", colActor, "ACTOR", colAction, "ACTION", colSandbox, "SANDBOX", colVerdict, "VERDICT", "TARGET / DETAIL"); err != nil {
			return err
		}
	}
	actor := r.Actor
	if n, ok := r.Detail["key_name"].(string); ok && n != "" {
		actor = n
	}
	target := r.Target
	if target == "" {
		target = detailSummary(r.Detail)
	}
	_, err := fmt.Fprintf(p.w, row, fmt.Sprint(r.Seq), r.Time.Local().Format(time.DateTime),
		colActor, cell(actor, colActor), colAction, cell(r.Action, colAction), colSandbox, cell(orDashCLI(r.Sandbox), colSandbox),
		colVerdict, cell(r.Verdict, colVerdict), cell(target, colTarget))
	return err
}

// detailSummary is a record's detail as key=value pairs, the few that say
// most first.
func detailSummary(d map[string]any) string {
	var parts []string
	for _, k := range []string{"reason", "command", "path", "exit_code", "note", "error"} {
		if v, ok := d[k]; ok && v != nil && fmt.Sprint(v) != "" {
			parts = append(parts, k+"="+fmt.Sprint(v))
		}
	}
	return strings.Join(parts, " ")
}

// cell escapes text from the server (client.Escape) and cuts it to width
// runes.
func cell(s string, width int) string {
	s = client.Escape(s)
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}
