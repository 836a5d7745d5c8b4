package sandbox

import (
	"context"
	"net"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox/loopback"
)

// Reaching a sandbox's own loopback: the preview proxy, the browser's
// DevTools port and its desktop's VNC server are servers listening on
// 127.0.0.1 inside a network namespace that holds only lo. The server never
// joins that namespace: the init connects there and passes the socket back
// (agent.OpDial), and the server relays bytes over it.
//
// Bounds: only Config.LoopbackPorts (which landlock also lets sandboxed
// code bind and connect; everything else stays closed), at most
// loopback.MaxConns open connections per sandbox, and only while the sandbox
// runs. Pausing (an owner's pause, an operator's HALT) and stopping (delete,
// idle stop, the owner's key revoked) close every relayed connection, so a
// DevTools or preview session never outlives the state that allowed it.
// The bounds' mechanism is internal/sandbox/loopback.

// BrowserPorts are the loopback ports the browser runtime uses inside every
// sandbox (package browser): Chromium's DevTools and the desktop's VNC
// server. They are reachable through DialPort but never through the
// preview proxy, whose ports are Config.PreviewPorts.
var BrowserPorts = []uint16{DevToolsPort, VNCPort}

// The browser runtime's fixed ports inside a sandbox.
const (
	DevToolsPort = 9222
	VNCPort      = 5900
)

// OpenRelays is how many relayed connections into the sandbox are open.
func (s *Sandbox) OpenRelays() int {
	return s.relay.Open()
}

// LoopbackPorts are the ports a sandbox's code may bind and the server may
// dial: the preview ports and the browser's.
func LoopbackPorts(preview []uint16) []uint16 {
	return loopback.Ports(preview, BrowserPorts)
}

// DialPort opens a TCP connection to 127.0.0.1:port inside a running
// sandbox's network namespace (loopback.Relays.Dial). It does not start a
// stopped sandbox (no server can be listening in it) and refuses a paused
// one.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return s.relay.Dial(ctx, relayed{s}, s.m.cfg.LoopbackPorts, port)
}

// Relay makes c — a connection the server opened to something the
// sandbox runs without dialling its loopback (the browser's DevTools) —
// one of the sandbox's relayed connections (loopback.Relays.Relay):
// refused unless the sandbox runs, counted against the cap, and closed by
// a pause, a HALT or a stop. On a refusal c is closed.
func (s *Sandbox) Relay(c net.Conn) (net.Conn, error) {
	return s.relay.Relay(relayed{s}, c)
}

// relayed is the sandbox as its relayed connections see it.
type relayed struct{ s *Sandbox }

// Init is the running init, or why the sandbox's loopback cannot be
// reached.
func (r relayed) Init() (loopback.Init, error) {
	s := r.s
	s.mu.Lock()
	state, inst, mode := s.state, s.inst, s.rec.Spec.Network.Mode
	s.mu.Unlock()
	switch {
	case mode == NetworkHost:
		return nil, fault.New(fault.Unsupported, "this sandbox shares the host's network (network.mode host); its loopback is the host's and is not reached through the sandbox")
	case state == Paused:
		return nil, fault.New(fault.Conflict, "sandbox is paused; resume it first")
	case state != Running || inst == nil:
		return nil, fault.New(fault.Conflict, "sandbox is not running")
	}
	return inst, nil
}

// Still reports whether in is still the running init.
func (r relayed) Still(in loopback.Init) bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.state == Running && r.s.inst != nil && loopback.Init(r.s.inst) == in
}

func (r relayed) Used() { r.s.touch() }

// DialPort is Sandbox.DialPort for the sandbox id the caller may see
// (another key's sandbox is NotFound).
func (m *Manager) DialPort(ctx context.Context, c Caller, id string, port int) (net.Conn, error) {
	s, err := m.Lookup(ctx, c, id)
	if err != nil {
		return nil, err
	}
	return s.DialPort(ctx, port)
}
