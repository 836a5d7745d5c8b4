package sandbox

import (
	"context"
	"fmt"
	"slices"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/posture"
)

// SelfTest starts one throw-away sandbox, runs a command in it and checks
// that every isolation layer the init reports is in force. The server runs
// it before serving, so a host that cannot isolate is found at start, not
// by the first client. It returns the layers.
func (m *Manager) SelfTest(ctx context.Context) ([]agent.Layer, error) {
	s, err := m.cold(ctx, Record{ID: newID(), Spec: Spec{Limits: m.cfg.Default, Network: Network{Mode: NetworkNone}}})
	if err != nil {
		return nil, fmt.Errorf("start a test sandbox: %w", err)
	}
	defer func() {
		s.shutdown()
		m.discard(s)
	}()
	// The command checks what the init reports from where sandboxed code
	// stands: its cgroup namespace and the paths it sees.
	hostNS, _ := posture.HostCgroupNS()
	e, err := s.Exec(ctx, ExecRequest{Argv: posture.CgroupNSProbe, Actor: "system"})
	if err != nil {
		return nil, fmt.Errorf("run a command in the test sandbox: %w", err)
	}
	r := e.Result()
	if r.Status != StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 {
		return nil, fmt.Errorf("test command ended %s (%s)", r.Status, r.Reason)
	}
	ns := posture.CheckCgroupNS(hostNS, []string{s.rec.ID}, r.Stdout) // the host path of every group of the sandbox holds its id
	s.mu.Lock()
	layers := append(slices.Clone(s.inst.Ready.Layers), agent.Layer{Name: ns.Name, Active: ns.OK, Detail: ns.Detail})
	s.mu.Unlock()
	var missing []string
	for _, l := range layers {
		if !l.Active {
			missing = append(missing, l.Name+" ("+l.Detail+")")
		}
	}
	if len(missing) > 0 && !m.cfg.Insecure {
		return layers, fmt.Errorf("isolation layers not in force: %v", missing)
	}
	if m.cfg.Templates != nil {
		// Reported, not required: a host that cannot build template
		// roots still serves host sandboxes (a template create then
		// fails with the reason).
		layers = append(layers, m.selfTestTemplate(ctx))
	}
	return layers, nil
}
