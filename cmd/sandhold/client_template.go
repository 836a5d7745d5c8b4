package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/sandhold/sandhold/internal/client"
)

// templateCmd is `sandhold template …`.
type templateCmd struct {
	Build   templateBuildCmd   `cmd:"" help:"Build a Dockerfile (subset) in a context directory into a template; RUN steps run in sandboxes on the server."`
	Pull    templatePullCmd    `cmd:"" help:"Make a template of an image from a registry the server allows."`
	Import  templateImportCmd  `cmd:"" help:"Make a template of an OCI layout tar or docker save tarball (- for stdin)."`
	Commit  templateCommitCmd  `cmd:"" help:"Make a template of a template sandbox's changes to its root."`
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
	return forEach(e, r.Refs, "templates not removed", func(ref string) (string, error) {
		return "removed " + client.Escape(ref), c.RemoveTemplate(ctx, ref)
	})
}

// nameTag splits NAME[:TAG].
func nameTag(ref string) (string, string) {
	if i := strings.LastIndexByte(ref, ':'); i > 0 {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

// progressPrinter prints a build's or a pull's events: steps and layers to
// stderr, a RUN's output as it comes (stdout to stdout).
func progressPrinter(e *env, quiet bool) func(client.TemplateEvent) {
	return func(ev client.TemplateEvent) {
		switch ev.Step {
		case "output":
			w := e.stderr
			if ev.Stream == "stdout" {
				w = e.stdout
			}
			if !quiet {
				_, _ = io.WriteString(w, ev.Message) // a command's output, as exec prints it
			}
		case "step":
			_, _ = fmt.Fprintf(e.stderr, "[%d/%d] %s\n", ev.Layer, ev.Layers, client.Escape(ev.Message))
		case "cached":
			_, _ = fmt.Fprintf(e.stderr, "  cached %s\n", short(ev.Digest))
		case "layer":
			if ev.Layers > 0 {
				state := "fetched"
				if ev.Cached {
					state = "present"
				}
				_, _ = fmt.Fprintf(e.stderr, "layer %d/%d %s %s (%s)\n", ev.Layer, ev.Layers, short(ev.Digest), state, client.IBytes(ev.Bytes))
			} else {
				_, _ = fmt.Fprintf(e.stderr, "  layer %s (%s)\n", short(ev.Digest), client.IBytes(ev.Bytes))
			}
		case "resolve", "build":
			_, _ = fmt.Fprintf(e.stderr, "%s %s\n", ev.Step, client.Escape(ev.Message))
		}
	}
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func printMade(e *env, t client.TemplateMade) error {
	_, err := fmt.Fprintf(e.stdout, "%s:%s %s\n", client.Escape(t.Name), client.Escape(t.Tag), client.Escape(t.Digest))
	return err
}

type templateBuildCmd struct {
	Dir       string   `arg:"" name:"context" help:"Context directory (sent as a tar; its Dockerfile unless -f)." type:"existingdir"`
	Name      string   `name:"tag" short:"t" required:"" help:"The template's name[:tag]."`
	File      string   `name:"file" short:"f" help:"The Dockerfile's path inside the context (default Dockerfile)."`
	BuildArgs []string `name:"build-arg" help:"KEY=VALUE for an ARG; repeatable."`
	Network   string   `help:"Egress of the RUN steps: none (default) or proxy." enum:",none,proxy" default:""`
	Allow     []string `help:"Egress allow-list entries for --network proxy; repeatable."`
	NoCache   bool     `name:"no-cache" help:"Run every step again."`
	Quiet     bool     `short:"q" help:"Do not print the RUN steps' output."`
}

func (b *templateBuildCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	name, tag := nameTag(b.Name)
	pr, pw := io.Pipe()
	go func() { _ = pw.CloseWithError(tarDir(pw, b.Dir)) }()
	defer func() { _ = pr.Close() }()
	req := client.BuildRequest{Name: name, Tag: tag, Dockerfile: b.File, BuildArgs: b.BuildArgs, Network: b.Network, Allow: b.Allow, NoCache: b.NoCache}
	t, err := c.Build(ctx, req, pr, progressPrinter(e, b.Quiet))
	if err != nil {
		return err
	}
	return printMade(e, t)
}

// tarDir writes dir's regular files, directories and symlinks as a tar.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p) //nolint:gosec // G304: a file of the user's own build context
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			_ = f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

type templatePullCmd struct {
	Image string `arg:"" help:"registry/repository[:tag][@digest]."`
	Name  string `name:"tag" short:"t" required:"" help:"The template's name[:tag]."`
}

func (p *templatePullCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	name, tag := nameTag(p.Name)
	t, err := c.Pull(ctx, client.PullRequest{Name: name, Tag: tag, Image: p.Image}, progressPrinter(e, false))
	if err != nil {
		return err
	}
	return printMade(e, t)
}

type templateImportCmd struct {
	File string `arg:"" help:"An OCI layout as a tar, or a docker save tarball; - reads stdin."`
	Name string `name:"tag" short:"t" required:"" help:"The template's name[:tag]."`
}

func (i *templateImportCmd) Run(ctx context.Context, e *env) error {
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
	name, tag := nameTag(i.Name)
	t, err := c.ImportTemplate(ctx, name, tag, r, progressPrinter(e, false))
	if err != nil {
		return err
	}
	return printMade(e, t)
}

type templateCommitCmd struct {
	Sandbox string `arg:"" help:"The template sandbox to commit."`
	Name    string `name:"tag" short:"t" required:"" help:"The new template's name[:tag]."`
}

func (cm *templateCommitCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	name, tag := nameTag(cm.Name)
	t, err := c.Commit(ctx, cm.Sandbox, name, tag)
	if err != nil {
		return err
	}
	return printMade(e, t)
}
