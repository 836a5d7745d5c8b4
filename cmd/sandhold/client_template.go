package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/sandhold/sandhold/internal/client"
)

// templateCmd is `sandhold template …`.
type templateCmd struct {
	Ls      templateLsCmd      `cmd:"" help:"List the templates you may use (yours and the public ones; host is built in)."`
	Inspect templateInspectCmd `cmd:"" help:"Print a template's layers, config and source as JSON."`
	Rm      templateRmCmd      `cmd:"" help:"Remove templates' names (their layers go once nothing uses them)."`
}

type templateLsCmd struct {
	JSON bool `name:"json" help:"Print the templates as JSON."`
}

func (l *templateLsCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	ts, err := c.Templates(ctx)
	if err != nil {
		return err
	}
	if l.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ts)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tTAG\tDIGEST\tSIZE\tLAYERS\tSOURCE\tOWNER\tCREATED")
	_, _ = fmt.Fprintln(tw, "host\t-\t-\t-\t-\tthe host's /usr\t-\t-")
	for _, t := range ts {
		owner := t.Owner
		if owner == "" {
			owner = "public"
		}
		digest := t.Digest
		if len(digest) > 19 {
			digest = digest[:19]
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", client.Escape(orDashCLI(t.Name)), client.Escape(orDashCLI(t.Tag)),
			client.Escape(digest), client.IBytes(t.Bytes), t.Layers, client.Escape(t.Source), client.Escape(owner), client.Escape(t.Created))
	}
	return tw.Flush()
}

type templateInspectCmd struct {
	Ref string `arg:"" name:"template" help:"name[:tag] or digest."`
}

func (i *templateInspectCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	raw, err := c.Template(ctx, i.Ref)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = e.stdout.Write(out.Bytes())
	return err
}

type templateRmCmd struct {
	Refs []string `arg:"" name:"template" help:"name[:tag]."`
}

func (r *templateRmCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	failed := 0
	for _, ref := range r.Refs {
		if err := c.RemoveTemplate(ctx, ref); err != nil {
			_, _ = fmt.Fprintf(e.stderr, "sandhold: %v\n", err)
			failed++
			continue
		}
		_, _ = fmt.Fprintf(e.stdout, "removed %s\n", client.Escape(ref))
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d templates not removed", failed, len(r.Refs))}
	}
	return nil
}
