// Package netmode is the mechanism of a sandbox's network modes: which
// modes the server offers and a caller may ask for, what an init needs for
// its mode, and the wiring of proxy-mode sandboxes to the host-side egress
// proxy with their counters (internal/sandbox's network.go says the modes;
// it keeps the sandboxes' records and their changes).
package netmode

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/egress"
	"github.com/sandhold/sandhold/internal/fault"
)

// The network modes (sandbox.Network.Mode).
const (
	None  = "none"
	Proxy = "proxy"
	Host  = "host"
)

// MaxAllow caps a sandbox's allow list as the API accepts it. Reason: the
// proxy scans the list on every request; a key must not make that scan,
// nor the stored record, arbitrarily long.
const MaxAllow = 256

// Egress is the host-side proxy the hub hands sandbox connections to;
// *egress.Proxy implements it.
type Egress interface {
	SetPolicy(sandboxID string, p egress.Policy) error
	Remove(sandboxID string)
	ServeConn(ctx context.Context, sandboxID string, c net.Conn)
}

var _ Egress = (*egress.Proxy)(nil)

// Counters are a sandbox's egress figures, from the proxy's events.
type Counters struct {
	BytesUp, BytesDown, Allowed, Denied int64
}

// Hub is the server's network wiring; its zero value offers mode none
// only.
type Hub struct {
	// mu guards the fields below.
	mu          sync.Mutex
	egress      Egress
	hostAllowed bool
	ctx         context.Context // ends when the manager stops
	counters    map[string]*Counters
}

// Enable offers proxy mode through e (nil: not offered) and, with
// hostAllowed, host mode to admins; the proxy's connections end once stop
// is closed.
func (h *Hub) Enable(stop <-chan struct{}, e Egress, hostAllowed bool) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	h.mu.Lock()
	h.egress, h.hostAllowed, h.ctx = e, hostAllowed, ctx
	if h.counters == nil {
		h.counters = make(map[string]*Counters)
	}
	h.mu.Unlock()
}

// Egress is the proxy, or nil.
func (h *Hub) Egress() Egress {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.egress
}

// Offers tells which modes beyond none the server offers.
func (h *Hub) Offers() (proxy, host bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.egress != nil, h.hostAllowed
}

// Check validates a requested mode and allow list for a caller (admin or
// not) and normalises them (mode none when empty, the list as the proxy
// parses it). It is the only gate on modes.
func (h *Hub) Check(admin bool, mode string, allow []string) (string, []string, error) {
	haveEgress, hostAllowed := h.Offers()
	switch mode {
	case "", None:
		if len(allow) > 0 {
			return "", nil, fault.InvalidField("network.allow", "an allow list needs network.mode proxy")
		}
		return None, allow, nil
	case Proxy:
		if !haveEgress {
			return "", nil, fault.New(fault.Unsupported, "network.mode proxy is not available on this server")
		}
		if len(allow) > MaxAllow {
			return "", nil, fault.InvalidField("network.allow", fmt.Sprintf("at most %d allow list entries", MaxAllow))
		}
		al, err := egress.ParsePolicy(egress.Policy{Allow: allow})
		if err != nil {
			return "", nil, fault.InvalidField("network.allow", err.Error())
		}
		if p := al.Privileged(); len(p) > 0 && !admin {
			return "", nil, fault.Errorf(fault.Forbidden, "allow list entries %s reach the host, loopback or private addresses; only an admin key may list them", strings.Join(p, ", "))
		}
		return mode, al.Entries(), nil
	case Host:
		switch {
		case !admin:
			return "", nil, fault.New(fault.Forbidden, "network.mode host shares the host's network; only an admin key may ask for it")
		case !hostAllowed:
			return "", nil, fault.New(fault.Forbidden, "network.mode host is disabled while SANDBOX_NETWORK_RESTRICTED is true")
		case len(allow) > 0:
			return "", nil, fault.InvalidField("network.allow", "network.mode host has no allow list (everything is reachable)")
		}
		return mode, allow, nil
	}
	return "", nil, fault.InvalidField("network.mode", "network.mode must be none, proxy or host")
}

// CheckStart refuses to start an init whose mode the server no longer
// offers (a host-mode record after SANDBOX_NETWORK_RESTRICTED went back
// to true, a proxy-mode record on a server without the proxy).
func (h *Hub) CheckStart(mode string) error {
	haveEgress, hostAllowed := h.Offers()
	switch {
	case mode == Host && !hostAllowed:
		return fault.New(fault.Forbidden, "this sandbox uses network.mode host, which is disabled while SANDBOX_NETWORK_RESTRICTED is true")
	case mode == Proxy && !haveEgress:
		return fault.New(fault.Unsupported, "this sandbox uses network.mode proxy, which is not available on this server")
	}
	return nil
}

// Launch sets up sandbox id's init for its mode: a proxy-mode init
// listens on agent.EgressPort inside and passes each connection to the
// proxy.
func (h *Hub) Launch(spec *agent.LaunchSpec, id, mode string, log *slog.Logger) {
	switch mode {
	case Proxy:
		spec.Setup.EgressListen = true
		spec.Setup.TCPConnect = []uint16{agent.EgressPort}
		spec.OnConn = func(f *os.File) { go h.serve(id, f, log) }
	case Host:
		spec.Setup.HostNetwork = true
	}
}

// serve serves one connection the init accepted on its listener.
func (h *Hub) serve(id string, f *os.File, log *slog.Logger) {
	c, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		log.Warn("egress connection", "sandbox", id, "err", err)
		return
	}
	h.mu.Lock()
	e, ctx := h.egress, h.ctx
	h.mu.Unlock()
	if e == nil {
		_ = c.Close()
		return
	}
	e.ServeConn(ctx, id, c)
}

// Attach installs a new sandbox's policy.
func (h *Hub) Attach(id, mode string, allow []string) error {
	if mode != Proxy {
		return nil
	}
	e := h.Egress()
	if e == nil {
		return fault.New(fault.Unsupported, "network.mode proxy is not available on this server")
	}
	return e.SetPolicy(id, egress.Policy{Allow: allow})
}

// Restore puts a recorded sandbox's policy in force again, before the
// server serves (a proxy-mode sandbox's allow list). Without a proxy,
// nothing: such a sandbox does not start (CheckStart).
func (h *Hub) Restore(id, mode string, allow []string) error {
	e := h.Egress()
	if mode != Proxy || e == nil {
		return nil
	}
	if err := e.SetPolicy(id, egress.Policy{Allow: allow}); err != nil {
		return fmt.Errorf("egress policy of sandbox %s: %w", id, err)
	}
	return nil
}

// Change puts a live sandbox's new allow list in force (mode proxy: for
// the next request; established tunnels are not cut). Call Leave once the
// sandbox has its new mode.
func (h *Hub) Change(id, mode string, allow []string) error {
	e := h.Egress()
	if mode != Proxy || e == nil {
		return nil
	}
	if err := e.SetPolicy(id, egress.Policy{Allow: allow}); err != nil {
		return fault.InvalidField("network.allow", err.Error())
	}
	return nil
}

// Leave drops the policy of a sandbox that left mode proxy (from) for
// another mode (to).
func (h *Hub) Leave(id, from, to string) {
	if e := h.Egress(); from == Proxy && to != Proxy && e != nil {
		e.Remove(id)
	}
}

// Detach forgets a deleted sandbox: its policy, live connections and
// counters.
func (h *Hub) Detach(id string) {
	h.mu.Lock()
	e := h.egress
	delete(h.counters, id)
	h.mu.Unlock()
	if e != nil {
		e.Remove(id)
	}
}

// Note adds one proxy event to a sandbox's counters.
func (h *Hub) Note(id string, allowed bool, up, down int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counters == nil {
		h.counters = make(map[string]*Counters)
	}
	c := h.counters[id]
	if c == nil {
		c = &Counters{}
		h.counters[id] = c
	}
	if allowed {
		c.Allowed++
	} else {
		c.Denied++
	}
	c.BytesUp += up
	c.BytesDown += down
}

// Stats returns a sandbox's counters (zero when it never connected).
func (h *Hub) Stats(id string) Counters {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.counters[id]; c != nil {
		return *c
	}
	return Counters{}
}

// NetworkPosture is what /v1/sandbox/security reports of the network.
type NetworkPosture struct {
	DefaultMode   string   `json:"default_mode"`
	Modes         []string `json:"modes_available"`
	ProxyListen   string   `json:"proxy_listen,omitempty" doc:"where proxy-mode sandboxes reach the egress proxy, inside the sandbox"`
	HostAllowed   bool     `json:"host_mode_allowed" doc:"SANDBOX_NETWORK_RESTRICTED=false: admins may share the host network"`
	HostSandboxes []string `json:"host_mode_sandboxes" doc:"sandboxes sharing the host's network"`
}

// Posture reports the modes on offer, none first, and the sandboxes on
// the host's network (hosts, never nil).
func (h *Hub) Posture(hosts []string) NetworkPosture {
	proxy, host := h.Offers()
	if hosts == nil {
		hosts = []string{}
	}
	p := NetworkPosture{DefaultMode: None, Modes: []string{None}, HostAllowed: host, HostSandboxes: hosts}
	if proxy {
		p.Modes = append(p.Modes, Proxy)
		p.ProxyListen = ProxyListen()
	}
	if host {
		p.Modes = append(p.Modes, Host)
	}
	return p
}

// ProxyListen is where proxy-mode sandboxes reach the proxy, inside.
func ProxyListen() string { return "127.0.0.1:" + strconv.Itoa(agent.EgressPort) }

// Env adds the proxy variables of a proxy-mode sandbox to a caller's
// environment (the caller's own values win: a program that ignores them
// reaches nothing anyway).
func Env(user map[string]string) map[string]string {
	// Both spellings: curl reads http_proxy only in lower case, other
	// tools only upper case.
	names := []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"}
	out := make(map[string]string, len(user)+len(names)+2)
	proxy := "http://" + ProxyListen()
	for _, k := range names {
		out[k] = proxy
	}
	// Loopback inside the sandbox is the sandbox's own.
	out["NO_PROXY"] = "localhost,127.0.0.1,::1"
	out["no_proxy"] = out["NO_PROXY"]
	for k, v := range user {
		out[k] = v
	}
	return out
}
