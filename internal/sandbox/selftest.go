package sandbox

import (
	"context"
	"slices"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/sandbox/selfcheck"
	"github.com/sandhold/sandhold/internal/template"
)

// SelfTest starts throw-away sandboxes and checks that every isolation
// layer the init reports is in force (selfcheck.Run). The server runs it
// before serving, so a host that cannot isolate is found at start, not by
// the first client. It returns the layers.
func (m *Manager) SelfTest(ctx context.Context) ([]agent.Layer, error) {
	return selfcheck.Run(ctx, selfcheck.Config{Start: m.startTestBox, Templates: m.cfg.Templates, Insecure: m.cfg.Insecure})
}

// startTestBox starts a self-test's sandbox: the default limits, no
// network, on template t (nil: the host's).
func (m *Manager) startTestBox(ctx context.Context, t *template.Template) (selfcheck.Box, error) {
	spec := Spec{Limits: m.cfg.Default, Network: Network{Mode: NetworkNone}}
	if t != nil {
		PinTemplate(&spec, *t)
	}
	s, err := m.cold(ctx, Record{ID: newID(), Spec: spec})
	if err != nil {
		return nil, err
	}
	return testBox{s}, nil
}

// testBox is a self-test's sandbox.
type testBox struct{ s *Sandbox }

func (b testBox) ID() string { return b.s.rec.ID }

func (b testBox) Layers() []agent.Layer {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return slices.Clone(b.s.inst.Ready.Layers)
}

func (b testBox) Run(ctx context.Context, argv []string) (selfcheck.Ran, error) {
	e, err := b.s.Exec(ctx, ExecRequest{Argv: argv, Actor: "system"})
	if err != nil {
		return selfcheck.Ran{}, err
	}
	r := e.Result()
	return selfcheck.Ran{Completed: r.Status == StatusCompleted, Status: r.Status, Reason: r.Reason, ExitCode: r.ExitCode, Stdout: r.Stdout}, nil
}

func (b testBox) Close() {
	b.s.shutdown()
	b.s.m.discard(b.s)
}
