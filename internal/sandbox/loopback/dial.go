package loopback

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"

	"github.com/sandhold/sandhold/internal/fault"
)

// Sandbox is the sandbox a relayed connection goes into, as the relay
// needs it (internal/sandbox says when a sandbox may be reached).
type Sandbox interface {
	// Init is the sandbox's running init, or the refusal that says why
	// it cannot be reached now (paused, not running, on the host's
	// network).
	Init() (Init, error)
	// Still reports whether in is still the sandbox's running init: a
	// pause or stop since Init closed the connections it saw, not the
	// one being opened.
	Still(in Init) bool
	// Used marks the sandbox as used (a relayed connection opened).
	Used()
}

// Init is a sandbox's running init: it connects to a port on the
// sandbox's loopback and passes the socket back (agent.OpDial).
type Init interface {
	Dial(ctx context.Context, port int) (*os.File, error)
}

// Dial opens a TCP connection to 127.0.0.1:port inside sandbox sb: port
// must be one of allowed, the sandbox must run, and the connection takes
// a place among its relayed connections (MaxConns).
func (r *Relays) Dial(ctx context.Context, sb Sandbox, allowed []uint16, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fault.InvalidField("port", "port must be within 1-65535")
	}
	if !slices.Contains(allowed, uint16(port)) { //nolint:gosec // G115: checked within 1-65535 above
		return nil, fault.Errorf(fault.Forbidden, "port %d is not one of the ports this server reaches inside a sandbox", port)
	}
	rc, in, release, err := r.hold(sb)
	if err != nil {
		return nil, err
	}
	f, err := in.Dial(ctx, port)
	if err != nil {
		release()
		return nil, DialFault(port, err)
	}
	c, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		release()
		return nil, fmt.Errorf("relayed connection: %w", err)
	}
	return r.place(sb, rc, in, c)
}

// Relay makes c — a connection the server opened to something sandbox sb
// runs without dialling its loopback (the browser's DevTools, spoken over
// the pipe the browser was started with) — one of the sandbox's relayed
// connections: refused unless the sandbox runs, counted against the cap,
// and closed by CloseAll. On a refusal c is closed.
func (r *Relays) Relay(sb Sandbox, c net.Conn) (net.Conn, error) {
	rc, in, _, err := r.hold(sb)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return r.place(sb, rc, in, c)
}

// hold checks that the sandbox runs and holds a place among its relayed
// connections (released by release, or by closing rc once it has a
// connection), so concurrent dials cannot pass the cap together.
func (r *Relays) hold(sb Sandbox) (rc *Conn, in Init, release func(), err error) {
	if in, err = sb.Init(); err != nil {
		return nil, nil, nil, err
	}
	if rc, release, err = r.Hold(); err != nil {
		return nil, nil, nil, err
	}
	return rc, in, release, nil
}

// place puts c in the place rc holds. A pause or stop between hold's check
// and now closed the connections it saw, not this one: the sandbox is
// asked again.
func (r *Relays) place(sb Sandbox, rc *Conn, in Init, c net.Conn) (net.Conn, error) {
	rc.Conn = c
	if !sb.Still(in) {
		_ = rc.Close()
		return nil, fault.New(fault.Conflict, "sandbox is not running")
	}
	sb.Used()
	return rc, nil
}
