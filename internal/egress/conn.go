package egress

// The connections the proxy relays between: the client side with its idle
// deadline, the upstream side counting bytes for the audit event.

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// activity is the time of the last byte moved in either direction of a
// connection, shared by its client and upstream sides so that a long
// one-way transfer does not trip the idle timeout of the quiet side.
type activity struct{ last atomic.Int64 }

func newActivity() *activity {
	a := &activity{}
	a.touch()
	return a
}

func (a *activity) touch()               { a.last.Store(time.Now().UnixNano()) }
func (a *activity) since() time.Duration { return time.Since(time.Unix(0, a.last.Load())) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// idleConn ends a connection after IdleTimeout without traffic in either
// direction of the session.
type idleConn struct {
	net.Conn
	idle time.Duration
	act  *activity
	// until, when set, is a hard read deadline regardless of activity. Only
	// the session goroutine sets it, while no other goroutine reads.
	until time.Time
}

func (c *idleConn) recentlyActive() bool { return c.act.since() < c.idle }

// CloseWrite half-closes the underlying connection when it can, else closes it.
func (c *idleConn) CloseWrite() error {
	closeWrite(c.Conn)
	return nil
}

func (c *idleConn) Read(b []byte) (int, error) {
	for {
		dl := time.Now().Add(c.idle)
		if !c.until.IsZero() && c.until.Before(dl) {
			dl = c.until
		}
		if err := c.SetReadDeadline(dl); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(b)
		if n > 0 {
			c.act.touch()
		}
		hardStop := !c.until.IsZero() && !time.Now().Before(c.until)
		if n == 0 && err != nil && isTimeout(err) && c.recentlyActive() && !hardStop {
			continue // the other direction is busy: keep waiting
		}
		return n, err
	}
}

func (c *idleConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		if err := c.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(b[written:])
		written += n
		if n > 0 {
			c.act.touch()
		}
		if err != nil {
			if isTimeout(err) && c.recentlyActive() {
				continue
			}
			return written, err
		}
	}
	return written, nil
}

// countConn counts bytes to (up) and from (down) the upstream.
type countConn struct {
	net.Conn
	up, down atomic.Int64
	// start is when the connection was opened (the event's time).
	start time.Time
}

// CloseWrite half-closes the upstream when it can, else closes it.
func (c *countConn) CloseWrite() error {
	closeWrite(c.Conn)
	return nil
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.down.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.up.Add(int64(n))
	return n, err
}
