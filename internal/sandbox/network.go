package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/sandbox/netmode"
)

// Network egress of sandboxes (ARCHITECTURE.md §3.2).
//
//   - none (default): the sandbox's network namespace holds only lo and
//     landlock allows no TCP connect: nothing leaves.
//   - proxy: the init listens on 127.0.0.1:agent.EgressPort inside and
//     passes every connection to the server, which serves it with the
//     host-side egress proxy under the sandbox's allow list; landlock
//     allows TCP connect to that port only. Every execution gets
//     HTTP_PROXY/HTTPS_PROXY/NO_PROXY (both cases) pointing there.
//   - host: no network namespace; the host's network is shared. Only an
//     admin may ask for it, and only when the server runs with
//     SANDBOX_NETWORK_RESTRICTED=false.
//
// The allow list of a proxy sandbox changes at run time (UpdateNetwork).
// The mode is fixed for the life of an init (landlock cannot be widened,
// the namespace cannot be swapped), so a mode change stops the sandbox's
// init; the next use starts it in the new mode. The modes' mechanism (the
// gate on them, an init's set-up, the proxy's wiring and counters) is
// internal/sandbox/netmode.

// Egress is the host-side proxy the manager hands sandbox connections to;
// *egress.Proxy implements it.
type Egress = netmode.Egress

// NetworkOptions enable the network modes beyond none.
type NetworkOptions struct {
	// Egress serves proxy mode; nil leaves proxy mode unavailable.
	Egress Egress
	// HostAllowed is SANDBOX_NETWORK_RESTRICTED=false: admins may create
	// sandboxes in host mode.
	HostAllowed bool
}

// NetCounters are a sandbox's egress figures, from the proxy's events.
type NetCounters struct {
	BytesUp   int64 `json:"bytes_up" doc:"bytes sent by the sandbox to allowed upstreams"`
	BytesDown int64 `json:"bytes_down" doc:"bytes received from allowed upstreams"`
	Allowed   int64 `json:"connections_allowed"`
	Denied    int64 `json:"connections_denied"`
}

// EnableNetwork turns on the modes opts allows and installs the egress
// policies of existing proxy-mode sandboxes. Call it once, before serving.
func (m *Manager) EnableNetwork(opts NetworkOptions) error {
	m.net.Enable(m.stop, opts.Egress, opts.HostAllowed)
	for _, s := range m.All() {
		n := s.network()
		if err := m.net.Restore(s.rec.ID, n.Mode, n.Allow); err != nil {
			return err
		}
	}
	return nil
}

// checkNetwork validates a requested network setting for caller c and
// normalises it (mode none when empty): netmode.Hub.Check.
func (m *Manager) checkNetwork(c Caller, n *Network) error {
	mode, allow, err := m.net.Check(c.Admin, n.Mode, n.Allow)
	if err != nil {
		return err
	}
	n.Mode, n.Allow = mode, allow
	return nil
}

// checkStart refuses to start an init whose mode the server no longer
// offers (netmode.Hub.CheckStart).
func (m *Manager) checkStart(n Network) error { return m.net.CheckStart(n.Mode) }

// netLaunch sets up an init's network for its mode.
func (m *Manager) netLaunch(spec *agent.LaunchSpec, id string, n Network) {
	m.net.Launch(spec, id, n.Mode, m.log)
}

// netAttach installs a new sandbox's policy.
func (m *Manager) netAttach(id string, n Network) error { return m.net.Attach(id, n.Mode, n.Allow) }

// netDetach forgets a deleted sandbox: its policy, live connections and
// counters.
func (m *Manager) netDetach(id string) { m.net.Detach(id) }

// NoteEgress adds one proxy event to a sandbox's counters (the daemon
// calls it from the proxy's OnEvent).
func (m *Manager) NoteEgress(id string, allowed bool, up, down int64) {
	m.mu.Lock()
	_, known := m.sandboxes[id]
	m.mu.Unlock()
	if !known {
		return // a deleted sandbox's last connection: nothing to keep
	}
	m.net.Note(id, allowed, up, down)
}

// NetStats returns a sandbox's egress counters (zero when it never
// connected).
func (m *Manager) NetStats(id string) NetCounters {
	return NetCounters(m.net.Stats(id))
}

// network returns the sandbox's current network setting.
func (s *Sandbox) network() Network {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.rec.Spec.Network
	n.Allow = append([]string(nil), n.Allow...)
	return n
}

// netEnv adds the proxy variables of a proxy-mode sandbox to a caller's
// environment (the caller's own values win: a program that ignores them
// reaches nothing anyway).
func (s *Sandbox) netEnv(user map[string]string) map[string]string {
	if s.network().Mode != NetworkProxy {
		return user
	}
	return netmode.Env(user)
}

// NetworkUpdate changes a live sandbox's network.
type NetworkUpdate struct {
	ID string `json:"id" required:"true"`
	// Mode, when set and different from the current mode, changes the mode:
	// the init must restart, so Restart must be true (running executions
	// and sessions end).
	Mode    string   `json:"mode,omitempty" enum:"none,proxy,host"`
	Allow   []string `json:"allow"`
	Restart bool     `json:"restart,omitempty"`
}

// NetworkResult is the outcome of UpdateNetwork.
type NetworkResult struct {
	ID      string  `json:"id"`
	Network Network `json:"network"`
	// Restarted is true when a mode change stopped the init; the next use
	// starts it in the new mode.
	Restarted bool `json:"restarted"`
}

// UpdateNetwork replaces a sandbox's allow list (proxy mode: in force for
// the next request, established tunnels are not cut) or its mode (the init
// is stopped; requires u.Restart).
func (m *Manager) UpdateNetwork(ctx context.Context, c Caller, u NetworkUpdate) (NetworkResult, error) {
	s, err := m.Lookup(ctx, c, u.ID)
	if err != nil {
		return NetworkResult{}, err
	}
	cur := s.network()
	want := Network{Mode: u.Mode, Allow: u.Allow}
	if want.Mode == "" {
		want.Mode = cur.Mode
	}
	if err := m.checkNetwork(c, &want); err != nil {
		return NetworkResult{}, err
	}
	modeChange := want.Mode != cur.Mode
	if modeChange && !u.Restart && s.State() != Stopped {
		return NetworkResult{}, fault.New(fault.Conflict, fmt.Sprintf("changing network.mode from %s to %s restarts the sandbox's init (running commands end); send restart: true", cur.Mode, want.Mode))
	}
	if err := m.net.Change(s.rec.ID, want.Mode, want.Allow); err != nil {
		return NetworkResult{}, err
	}
	// The record changes first, so an init started from now on (by a
	// concurrent call after the shutdown below) has the new mode.
	s.mu.Lock()
	s.rec.Spec.Network = want
	rec := s.rec
	s.mu.Unlock()
	if modeChange {
		s.shutdown()
	}
	m.net.Leave(s.rec.ID, cur.Mode, want.Mode)
	if err := m.records.PutSandbox(ctx, rec); err != nil {
		return NetworkResult{}, fmt.Errorf("save sandbox: %w", err)
	}
	return NetworkResult{ID: rec.ID, Network: want, Restarted: modeChange}, nil
}

// NetworkPosture is what /v1/sandbox/security reports of the network.
type NetworkPosture = netmode.NetworkPosture

// Caps are the concurrency caps the manager enforces itself.
type Caps struct {
	SandboxesPerKey      int `json:"max_sandboxes_per_key" doc:"live sandboxes per non-admin key (429 beyond; 0: no cap)"`
	ExecutionsPerSandbox int `json:"max_executions_per_sandbox" doc:"concurrent executions per sandbox (429 beyond)"`
}

// Caps reports the manager's caps.
func (m *Manager) Caps() Caps {
	return Caps{SandboxesPerKey: m.cfg.MaxPerOwner, ExecutionsPerSandbox: m.cfg.MaxExecsPerSandbox}
}

// NetworkPosture reports the modes on offer and the host-mode sandboxes.
func (m *Manager) NetworkPosture() NetworkPosture {
	host := []string{}
	for _, s := range m.All() {
		if s.network().Mode == NetworkHost {
			host = append(host, s.rec.ID)
		}
	}
	return m.net.Posture(host)
}

// Retry hints of the manager's caps (their refusals are
// dispatch.CapRefusal): nobody knows when a sandbox is deleted or an
// execution ends, so these are polling intervals.
const (
	sandboxCapRetry = 60 * time.Second
	execCapRetry    = ratelimit.ConcurrencyRetryAfter
)

// ToolNetworkUpdate changes a sandbox's network.
var ToolNetworkUpdate = dispatch.Ref[NetworkUpdate, NetworkResult]("network.update")
