package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/sandhold/sandhold/internal/client"
)

// snapshotCmd is `sandhold snapshot …`.
type snapshotCmd struct {
	Create snapshotCreateCmd `cmd:"" help:"Snapshot a sandbox (its files, installed packages and settings; not its processes); prints the snapshot's id."`
	Ls     snapshotLsCmd     `cmd:"" help:"List your snapshots."`
	Rm     snapshotRmCmd     `cmd:"" help:"Delete snapshots (sandboxes made from them keep their files)."`
	Export snapshotExportCmd `cmd:"" help:"Write a snapshot's export (a signed tar stream) to a file, or - for stdout."`
	Import snapshotImportCmd `cmd:"" help:"Import an export made by this server (or its cluster) from a file, or - for stdin."`
}

type snapshotCreateCmd struct {
	Sandbox string `arg:"" help:"The sandbox (name, id or id prefix)."`
	Name    string `help:"A name for the snapshot."`
	JSON    bool   `name:"json" help:"Print the snapshot as JSON."`
}

func (cr *snapshotCreateCmd) Run(ctx context.Context, e *env) error {
	c, cfg, err := connect()
	if err != nil {
		return err
	}
	id, err := sandboxOf(ctx, c, cr.Sandbox, cfg)
	if err != nil {
		return err
	}
	sn, err := c.CreateSnapshot(ctx, id, cr.Name)
	if err != nil {
		return err
	}
	if cr.JSON {
		return printJSON(e.stdout, sn)
	}
	_, err = fmt.Fprintln(e.stdout, client.Escape(sn.ID))
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

type snapshotLsCmd struct {
	JSON bool `name:"json" help:"Print the snapshots as JSON."`
}

func (l *snapshotLsCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	ss, err := c.Snapshots(ctx)
	if err != nil {
		return err
	}
	if l.JSON {
		return printJSON(e.stdout, ss)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "ID\tNAME\tSANDBOX\tSIZE\tDISK\tTEMPLATE\tDIGEST\tCREATED")
	for _, s := range ss {
		digest := s.Digest
		if len(digest) > 19 {
			digest = digest[:19]
		}
		if s.State == "sealing" {
			digest = "(sealing)"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", client.Escape(s.ID), client.Escape(orDashCLI(s.Name)), client.Escape(s.Sandbox),
			client.IBytes(s.Bytes), client.IBytes(s.ImageSize), client.Escape(orDashCLI(s.Template)), client.Escape(digest), client.Escape(s.Created))
	}
	return tw.Flush()
}

type snapshotRmCmd struct {
	IDs []string `arg:"" name:"snapshot" help:"Snapshot ids."`
}

func (r *snapshotRmCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	return forEach(e, r.IDs, "snapshots not deleted", func(id string) (string, error) {
		return "deleted " + client.Escape(id), c.DeleteSnapshot(ctx, id)
	})
}

type snapshotExportCmd struct {
	ID  string `arg:"" name:"snapshot" help:"The snapshot's id."`
	Out string `arg:"" name:"file" help:"Where to write the export (- for stdout)."`
}

func (x *snapshotExportCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	if x.Out == "-" {
		_, err := c.ExportSnapshot(ctx, x.ID, e.stdout)
		return err
	}
	// Written beside its name and renamed once whole: a cut transfer
	// leaves no file that looks complete.
	tmp := x.Out + ".part"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // #nosec G304 -- the path the user named on their own command line
	if err != nil {
		return err
	}
	digest, err := c.ExportSnapshot(ctx, x.ID, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, x.Out); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stderr, "exported %s (%s) to %s\n", client.Escape(x.ID), client.Escape(digest), client.Escape(x.Out))
	return err
}

type snapshotImportCmd struct {
	File string `arg:"" help:"The export (- for stdin)."`
	Name string `help:"A name for the imported snapshot (default: the export's)."`
}

func (i *snapshotImportCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	var r io.Reader = os.Stdin
	if i.File != "-" {
		f, err := os.Open(i.File)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	sn, err := c.ImportSnapshot(ctx, i.Name, r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, client.Escape(sn.ID))
	return err
}

type clientForkCmd struct {
	Snapshot string `arg:"" help:"The snapshot's id."`
	Count    int    `name:"count" short:"n" default:"1" help:"How many sandboxes (1–32)."`
	Name     string `help:"Name prefix of the forks (name-1, name-2, …)."`
	JSON     bool   `name:"json" help:"Print the fork's answer as JSON."`
}

func (f *clientForkCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	out, err := c.ForkSnapshot(ctx, f.Snapshot, f.Count, f.Name)
	if err != nil {
		return flagErr(err, map[string]string{"count": "--count", "name": "--name"})
	}
	if f.JSON {
		return printJSON(e.stdout, out)
	}
	for _, sb := range out.Sandboxes {
		if _, err := fmt.Fprintln(e.stdout, client.Escape(sb.ID)); err != nil {
			return err
		}
	}
	return nil
}

type clientHibernateCmd struct {
	Sandbox string `arg:"" help:"The sandbox (name, id or id prefix)."`
}

func (h *clientHibernateCmd) Run(ctx context.Context, e *env) error {
	c, cfg, err := connect()
	if err != nil {
		return err
	}
	id, err := sandboxOf(ctx, c, h.Sandbox, cfg)
	if err != nil {
		return err
	}
	if err := c.Hibernate(ctx, id); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "hibernated %s\n", client.Escape(id))
	return err
}
