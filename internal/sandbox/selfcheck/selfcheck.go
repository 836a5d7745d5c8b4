// Package selfcheck is the server's self-test of isolation, run in the
// server before it serves (and by `sandhold doctor`): it starts throw-away
// sandboxes through Config.Start (internal/sandbox's manager makes them),
// runs a command in each and checks that every isolation layer the init
// reports is in force, and that a template sandbox runs on its template's
// root and not on the host's /usr. A host that cannot isolate is found at
// start, not by the first client.
package selfcheck

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/posture"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/template"
)

// TemplateRow names the self-test's row for template sandboxes.
const TemplateRow = "template sandbox (overlay root)"

// Box is one throw-away sandbox the self-test started.
type Box interface {
	// ID is the sandbox's id: the host path of each of its groups holds
	// it.
	ID() string
	// Layers are the isolation layers its init reported.
	Layers() []agent.Layer
	// Run runs argv in the sandbox as the system and waits for its end.
	Run(ctx context.Context, argv []string) (Ran, error)
	// Close stops the sandbox and throws it away.
	Close()
}

// Ran is how a command of the self-test ended.
type Ran struct {
	// Completed is true when it ran to its end (not killed, not timed
	// out); Status and Reason are the execution's own words.
	Completed      bool
	Status, Reason string
	ExitCode       *int
	Stdout         string
}

// Config is what the self-test needs of the server.
type Config struct {
	// Start starts a throw-away sandbox with the server's default limits
	// and no network: of template t, or of the host's when t is nil.
	Start func(ctx context.Context, t *template.Template) (Box, error)
	// Templates is the template store; nil when the server keeps none
	// (the template row is left out).
	Templates *template.Store
	// Insecure (SANDBOX_INSECURE) reports missing layers instead of
	// failing on them.
	Insecure bool
}

// Run starts one sandbox, runs a command in it and checks that every
// isolation layer the init reports is in force; with a template store it
// adds the template row (TemplateRow), which is reported, not required. It
// returns the layers.
func Run(ctx context.Context, cfg Config) ([]agent.Layer, error) {
	b, err := cfg.Start(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("start a test sandbox: %w", err)
	}
	defer b.Close()
	// The command checks what the init reports from where sandboxed code
	// stands: its cgroup namespace and the paths it sees.
	hostNS, _ := posture.HostCgroupNS()
	r, err := b.Run(ctx, posture.CgroupNSProbe)
	if err != nil {
		return nil, fmt.Errorf("run a command in the test sandbox: %w", err)
	}
	if !r.Completed || r.ExitCode == nil || *r.ExitCode != 0 {
		return nil, fmt.Errorf("test command ended %s (%s)", r.Status, r.Reason)
	}
	ns := posture.CheckCgroupNS(hostNS, []string{b.ID()}, r.Stdout) // the host path of every group of the sandbox holds its id
	layers := append(slices.Clone(b.Layers()), agent.Layer{Name: ns.Name, Active: ns.OK, Detail: ns.Detail})
	var missing []string
	for _, l := range layers {
		if !l.Active {
			missing = append(missing, l.Name+" ("+l.Detail+")")
		}
	}
	if len(missing) > 0 && !cfg.Insecure {
		return layers, fmt.Errorf("isolation layers not in force: %v", missing)
	}
	if cfg.Templates != nil {
		// Reported, not required: a host that cannot build template
		// roots still serves host sandboxes (a template create then
		// fails with the reason).
		layers = append(layers, templateRow(ctx, cfg))
	}
	return layers, nil
}

// templateRow starts one sandbox from a throw-away one-layer template and
// checks what a template root must be: the init built it with every layer
// in force, and (where the host has a static busybox to put in the layer)
// a command inside sees the template's tree and not the host's /usr.
func templateRow(ctx context.Context, cfg Config) agent.Layer {
	row := agent.Layer{Name: TemplateRow}
	fail := func(err error) agent.Layer {
		row.Detail = err.Error()
		return row
	}
	bb := template.StaticBusybox()
	raw, err := templateroot.SelfTestLayer(bb)
	if err != nil {
		return fail(err)
	}
	txn := cfg.Templates.Begin()
	defer txn.Close()
	l, err := txn.AddLayer(ctx, bytes.NewReader(raw), template.LayerSource{})
	if err != nil {
		return fail(fmt.Errorf("store the test layer: %w", err))
	}
	t, err := txn.Put(template.Caller{Admin: true}, "", "", template.Manifest{Layers: []template.Layer{l}, Source: template.Source{Kind: "selftest"}})
	if err != nil {
		return fail(err)
	}
	b, err := cfg.Start(ctx, &t)
	if err != nil {
		return fail(fmt.Errorf("start a template sandbox: %w", err))
	}
	defer b.Close()
	var inactive []string
	for _, l := range b.Layers() {
		if !l.Active {
			inactive = append(inactive, l.Name)
		}
	}
	if len(inactive) > 0 && !cfg.Insecure {
		return fail(fmt.Errorf("layers not in force in a template sandbox: %v", inactive))
	}
	if bb == "" {
		row.Active, row.Detail = true, "overlay root built with every layer in force; no static busybox on the host to run a command in it"
		return row
	}
	r, err := b.Run(ctx, []string{"/bin/busybox", "sh", "-c", "cat /selftest && ls /usr/lib 2>/dev/null | wc -l"})
	if err != nil {
		return fail(fmt.Errorf("run a command in the template sandbox: %w", err))
	}
	if !r.Completed || strings.TrimSpace(r.Stdout) != "template\n0" {
		return fail(fmt.Errorf("the template sandbox's command saw %q (%s): want the template's file and no host /usr", r.Stdout, r.Status))
	}
	row.Active, row.Detail = true, "overlay root built with every layer in force; a command inside sees the template's tree, not the host's /usr"
	return row
}
