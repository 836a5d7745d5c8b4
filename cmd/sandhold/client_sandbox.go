package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/sandhold/sandhold/internal/client"
)

type clientLsCmd struct {
	JSON bool `name:"json" help:"Print the sandboxes as JSON."`
}

func (l *clientLsCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	sbs, err := c.List(ctx)
	if err != nil {
		return err
	}
	if l.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sbs)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "ID\tNAME\tSTATE\tOWNER\tMEMORY\tCPU\tPIDS\tNETWORK\tCREATED")
	for _, s := range sbs {
		name := s.Name
		if s.Default {
			name += " (default)"
		}
		mem, cpu, pids := "-", "-", "-"
		if s.Limits.MemoryBytes > 0 {
			mem = client.IBytes(s.Limits.MemoryBytes)
		}
		if s.Limits.CPUMilli > 0 {
			cpu = fmt.Sprintf("%.2g", float64(s.Limits.CPUMilli)/1000)
		}
		if s.Limits.Pids > 0 {
			pids = fmt.Sprint(s.Limits.Pids)
		}
		net := s.Network.Mode
		if net == "" {
			net = "none"
		}
		// Names and owners come from callers: escaped.
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", client.Escape(s.ID), client.Escape(orDashCLI(name)), client.Escape(s.State),
			client.Escape(s.Owner), mem, cpu, pids, client.Escape(net), s.Created.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func orDashCLI(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type clientCreateCmd struct {
	Name     string   `help:"A name for the sandbox (other commands take it instead of the id)."`
	Memory   string   `help:"Memory limit, e.g. 512MiB (default and maximum: the server's SANDBOX_MAX_MEMORY)."`
	CPU      float64  `name:"cpu" help:"CPU quota in CPUs, e.g. 0.5 (default 1)."`
	Pids     int64    `help:"Process/thread limit (default and maximum: the server's SANDBOX_MAX_PROCESSES)."`
	Disk     string   `help:"Workspace quota, e.g. 2GiB (default and maximum: the server's SANDBOX_MAX_DISK)."`
	CPUTime  string   `name:"cpu-time" help:"CPU time per command, e.g. 10s (default and maximum: the server's SANDBOX_MAX_CPU_TIME)."`
	Network  string   `help:"Network mode: none (default), proxy or host (admin only)." enum:",none,proxy,host" default:""`
	Allow    []string `help:"Egress allow-list entries for --network proxy (host, *.domain, host:port); repeatable."`
	TTL      string   `name:"ttl" help:"Delete the sandbox this long after creation, e.g. 2h (then exec -d commands have no wall limit)."`
	Template string   `name:"template" short:"t" help:"Template to make the sandbox from (name[:tag] or digest; sandhold template ls). Default: host."`
	Snapshot string   `name:"snapshot" help:"Snapshot to make the sandbox from (sandhold snapshot ls): its files, packages, template and limits; processes start afresh."`
	JSON     bool     `name:"json" help:"Print the whole sandbox as JSON instead of its id."`
}

func (cr *clientCreateCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	req := client.CreateRequest{Name: cr.Name, TTL: cr.TTL, Template: cr.Template, Snapshot: cr.Snapshot}
	if cr.Memory != "" || cr.CPU != 0 || cr.Pids != 0 || cr.Disk != "" || cr.CPUTime != "" {
		req.Limits = &client.Limits{Memory: cr.Memory, CPU: cr.CPU, Pids: cr.Pids, Disk: cr.Disk, CPUTime: cr.CPUTime}
	}
	if cr.Network != "" || len(cr.Allow) > 0 {
		req.Network = &client.Network{Mode: cr.Network, Allow: cr.Allow}
	}
	sb, err := c.Create(ctx, req)
	if err != nil {
		return flagErr(err, map[string]string{"name": "--name", "limits.memory": "--memory", "limits.cpu": "--cpu", "limits.pids": "--pids",
			"limits.disk": "--disk", "limits.cpu_time": "--cpu-time", "network.mode": "--network", "network.allow": "--allow", "ttl": "--ttl"})
	}
	if cr.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sb)
	}
	_, err = fmt.Fprintln(e.stdout, client.Escape(sb.ID))
	return err
}

type clientRmCmd struct {
	IDs []string `arg:"" name:"sandbox" help:"Sandbox names or ids (or unique id prefixes)."`
}

func (r *clientRmCmd) Run(ctx context.Context, e *env) error {
	c, _, err := connect()
	if err != nil {
		return err
	}
	return forEach(e, r.IDs, "sandboxes not deleted", func(ref string) (string, error) {
		id, err := c.Resolve(ctx, ref)
		if err == nil {
			err = c.Delete(ctx, id)
		}
		if err != nil {
			return "", err
		}
		if ref != id {
			return fmt.Sprintf("deleted %s (%s)", client.Escape(ref), client.Escape(id)), nil
		}
		return "deleted " + client.Escape(id), nil
	})
}
