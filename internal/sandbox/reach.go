package sandbox

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/sandhold/sandhold/internal/agent"
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
// sandbox's network namespace. It does not start a stopped sandbox (no
// server can be listening in it) and refuses a paused one.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fault.InvalidField("port", "port must be within 1-65535")
	}
	if !slices.Contains(s.m.cfg.LoopbackPorts, uint16(port)) { //nolint:gosec // G115: checked within 1-65535 above
		return nil, fault.Errorf(fault.Forbidden, "port %d is not one of the ports this server reaches inside a sandbox", port)
	}
	rc, inst, release, err := s.holdRelay()
	if err != nil {
		return nil, err
	}
	f, err := inst.Dial(ctx, port)
	if err != nil {
		release()
		return nil, loopback.DialFault(port, err)
	}
	c, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		release()
		return nil, fmt.Errorf("relayed connection: %w", err)
	}
	return s.openRelay(rc, inst, c)
}

// Relay makes c — a connection the server opened to something the
// sandbox runs without dialling its loopback (the browser's DevTools,
// spoken over the pipe the browser was started with) — one of the
// sandbox's relayed connections: refused unless the sandbox runs, counted
// against the cap, and closed by a pause, a HALT or a stop. On a refusal
// c is closed.
func (s *Sandbox) Relay(c net.Conn) (net.Conn, error) {
	rc, inst, _, err := s.holdRelay()
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return s.openRelay(rc, inst, c)
}

// holdRelay checks that the sandbox runs and holds a place among its
// relayed connections (released by release, or by closing rc once it has
// a connection), so concurrent dials cannot pass the cap together.
func (s *Sandbox) holdRelay() (rc *loopback.Conn, inst *agent.Instance, release func(), err error) {
	s.mu.Lock()
	state, inst, mode := s.state, s.inst, s.rec.Spec.Network.Mode
	s.mu.Unlock()
	switch {
	case mode == NetworkHost:
		return nil, nil, nil, fault.New(fault.Unsupported, "this sandbox shares the host's network (network.mode host); its loopback is the host's and is not reached through the sandbox")
	case state == Paused:
		return nil, nil, nil, fault.New(fault.Conflict, "sandbox is paused; resume it first")
	case state != Running || inst == nil:
		return nil, nil, nil, fault.New(fault.Conflict, "sandbox is not running")
	}
	rc, release, err = s.relay.Hold()
	if err != nil {
		return nil, nil, nil, err
	}
	return rc, inst, release, nil
}

// openRelay puts c in the place rc holds. A pause or stop between
// holdRelay's state check and now closed the connections it saw, not this
// one: the state is checked again.
func (s *Sandbox) openRelay(rc *loopback.Conn, inst *agent.Instance, c net.Conn) (net.Conn, error) {
	rc.Conn = c
	s.mu.Lock()
	still := s.state == Running && s.inst == inst
	s.mu.Unlock()
	if !still {
		_ = rc.Close()
		return nil, fault.New(fault.Conflict, "sandbox is not running")
	}
	s.touch()
	return rc, nil
}

// DialPort is Sandbox.DialPort for the sandbox id the caller may see
// (another key's sandbox is NotFound).
func (m *Manager) DialPort(ctx context.Context, c Caller, id string, port int) (net.Conn, error) {
	s, err := m.Lookup(ctx, c, id)
	if err != nil {
		return nil, err
	}
	return s.DialPort(ctx, port)
}
