package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/sandbox/templateroot"
	"github.com/sandhold/sandhold/internal/template"
)

// TemplateSelfTest names the self-test's row for template sandboxes.
const TemplateSelfTest = "template sandbox (overlay root)"

// selfTestTemplate starts one sandbox from a throw-away one-layer template
// and checks what a template root must be: the init built it with every
// layer in force, and (where the host has a static busybox to put in the
// layer) a command inside sees the template's tree and not the host's
// /usr.
func (m *Manager) selfTestTemplate(ctx context.Context) agent.Layer {
	row := agent.Layer{Name: TemplateSelfTest}
	fail := func(err error) agent.Layer {
		row.Detail = err.Error()
		return row
	}
	bb := template.StaticBusybox()
	raw, err := templateroot.SelfTestLayer(bb)
	if err != nil {
		return fail(err)
	}
	txn := m.cfg.Templates.Begin()
	defer txn.Close()
	l, err := txn.AddLayer(ctx, bytes.NewReader(raw), template.LayerSource{})
	if err != nil {
		return fail(fmt.Errorf("store the test layer: %w", err))
	}
	t, err := txn.Put(template.Caller{Admin: true}, "", "", template.Manifest{Layers: []template.Layer{l}, Source: template.Source{Kind: "selftest"}})
	if err != nil {
		return fail(err)
	}
	spec := Spec{Limits: m.cfg.Default, Network: Network{Mode: NetworkNone}}
	PinTemplate(&spec, t)
	s, err := m.cold(ctx, Record{ID: newID(), Spec: spec})
	if err != nil {
		return fail(fmt.Errorf("start a template sandbox: %w", err))
	}
	defer func() {
		s.shutdown()
		m.discard(s)
	}()
	s.mu.Lock()
	var inactive []string
	for _, l := range s.inst.Ready.Layers {
		if !l.Active {
			inactive = append(inactive, l.Name)
		}
	}
	s.mu.Unlock()
	if len(inactive) > 0 && !m.cfg.Insecure {
		return fail(fmt.Errorf("layers not in force in a template sandbox: %v", inactive))
	}
	if bb == "" {
		row.Active, row.Detail = true, "overlay root built with every layer in force; no static busybox on the host to run a command in it"
		return row
	}
	e, err := s.Exec(ctx, ExecRequest{Argv: []string{"/bin/busybox", "sh", "-c", "cat /selftest && ls /usr/lib 2>/dev/null | wc -l"}, Actor: "system"})
	if err != nil {
		return fail(fmt.Errorf("run a command in the template sandbox: %w", err))
	}
	r := e.Result()
	if r.Status != StatusCompleted || strings.TrimSpace(r.Stdout) != "template\n0" {
		return fail(fmt.Errorf("the template sandbox's command saw %q (%s): want the template's file and no host /usr", r.Stdout, r.Status))
	}
	row.Active, row.Detail = true, "overlay root built with every layer in force; a command inside sees the template's tree, not the host's /usr"
	return row
}
