package sandboxtools

import (
	"context"
	"strings"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/sandbox"
)

// NetworkTools declares network.update (registered with the egress proxy,
// which serves what it changes).
func NetworkTools(m *sandbox.Manager) []dispatch.Tool {
	spec := dispatch.Spec{Description: "Change a sandbox's egress allow list (or, with restart, its network mode)", Risk: guard.Medium}
	return []dispatch.Tool{dispatch.Define(sandbox.ToolNetworkUpdate, spec, func(ctx context.Context, c auth.Caller, u sandbox.NetworkUpdate) (sandbox.NetworkResult, error) {
		return m.UpdateNetwork(ctx, sandbox.Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, u)
	}, dispatch.Hooks[sandbox.NetworkUpdate, sandbox.NetworkResult]{
		Assess: func(u sandbox.NetworkUpdate) dispatch.Assessment {
			if u.Mode == sandbox.NetworkHost {
				return dispatch.Assessment{Risk: guard.Dangerous, Reasons: []string{"shares the host's network"}}
			}
			return dispatch.Assessment{}
		},
		Describe: func(u sandbox.NetworkUpdate) dispatch.Target {
			return dispatch.Target{Sandbox: u.ID, Target: strings.Join(u.Allow, " "), Detail: map[string]any{"mode": u.Mode, "restart": u.Restart}}
		},
		Summarize: func(_ sandbox.NetworkUpdate, r sandbox.NetworkResult) map[string]any {
			return map[string]any{"mode": r.Network.Mode, "allow": r.Network.Allow, "restarted": r.Restarted}
		},
	})}
}
