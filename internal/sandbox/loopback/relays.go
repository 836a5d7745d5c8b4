// Package loopback bounds the connections the server relays into a
// sandbox's own loopback (the preview proxy, the browser's DevTools port,
// its desktop's VNC server): the ports it may reach, the cap on open
// relayed connections, closing them all at once, and what a failed dial
// tells a client; Dial and Relay open a relayed connection into a Sandbox
// that says whether it runs. It runs in the server; internal/sandbox
// decides when a sandbox may be reached.
package loopback

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"syscall"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

// MaxConns caps the relayed connections open into one sandbox at a time:
// each holds a socket and two relay goroutines on the server, and a page
// with many WebSockets or a client in a loop must not exhaust them.
const MaxConns = 64

// Relays are a sandbox's open relayed connections; the zero value has
// none.
type Relays struct {
	// mu guards open.
	mu   sync.Mutex
	open map[*Conn]struct{}
}

// Conn is one relayed connection; Close releases its place.
type Conn struct {
	net.Conn
	r    *Relays
	once sync.Once
}

// Close closes the connection and gives its place back.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.r.mu.Lock()
		delete(c.r.open, c)
		c.r.mu.Unlock()
	})
	return err
}

// Hold takes a place among the relayed connections (released by release,
// or by closing the Conn once it has a connection), so concurrent dials
// cannot pass the cap together.
func (r *Relays) Hold() (c *Conn, release func(), err error) {
	r.mu.Lock()
	if len(r.open) >= MaxConns {
		r.mu.Unlock()
		return nil, nil, fault.Errorf(fault.Conflict, "%d connections into this sandbox are open already (the cap)", MaxConns)
	}
	if r.open == nil {
		r.open = make(map[*Conn]struct{})
	}
	c = &Conn{r: r}
	r.open[c] = struct{}{}
	r.mu.Unlock()
	release = func() {
		r.mu.Lock()
		delete(r.open, c)
		r.mu.Unlock()
	}
	return c, release, nil
}

// CloseAll closes every open relayed connection (pause, HALT, stop).
func (r *Relays) CloseAll() {
	r.mu.Lock()
	open := make([]*Conn, 0, len(r.open))
	for c := range r.open {
		open = append(open, c)
	}
	r.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// Open is how many relayed connections are open.
func (r *Relays) Open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open)
}

// Ports are the ports a sandbox's code may bind and the server may dial:
// the preview ports and others (the browser's), sorted, once each.
func Ports(preview, others []uint16) []uint16 {
	out := slices.Clone(preview)
	for _, p := range others {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// DialFault maps the init's dial errors to what a client may see.
func DialFault(port int, err error) error {
	var ae *agent.Error
	errno := syscall.Errno(0)
	if errors.As(err, &ae) {
		errno = ae.Errno()
	}
	switch {
	case errno == syscall.ECONNREFUSED:
		return fault.Errorf(fault.Unavailable, "nothing listens on port %d in the sandbox", port)
	case errno == syscall.ETIMEDOUT:
		return fault.Errorf(fault.Timeout, "port %d in the sandbox did not accept the connection in time", port)
	case errors.Is(err, agent.ErrGone):
		return fault.New(fault.Conflict, "sandbox is not running")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fault.Wrap(fault.Internal, err, "the connection into the sandbox failed")
}
