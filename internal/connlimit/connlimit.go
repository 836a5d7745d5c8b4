// Package connlimit bounds the connections an HTTP server holds, so that a
// flood of connections — many clients, or one key's thousands of calls
// each waiting for an operator's approval — cannot exhaust the process's
// file descriptors or its accept queue, and the operator can still reach
// the server.
//
// What it stops: fd and accept-queue exhaustion (`accept4: too many open
// files`, an admin request that times out). How:
//
//   - Listener counts the open connections. Up to Max they are served as
//     usual. Beyond Max, up to Max+Reserve, a connection is accepted and
//     marked: Guard answers its requests 503 (Connection: close) unless
//     they are exempt (the daemon exempts /healthz and /v1/control, so the
//     operator can read and set HALT). Beyond Max+Reserve a connection is
//     answered a fixed 503 and closed at once, without being handed to
//     the server: the accept queue keeps draining and no fd is held.
//   - At Max the listener calls Pressure (the daemon turns keep-alives off,
//     which closes idle connections at once and every answered one after
//     its answer), and Relief once the count is below Max/2.
//
// What it does not stop: a client that holds connections open without
// sending anything holds them until the server's ReadHeaderTimeout; and
// a count per key needs the key, so it lives where requests are
// authenticated (the daemon's in-flight table), not here.
package connlimit

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults, with their reasons.
const (
	// DefaultReserve is how many connections beyond Max are still
	// accepted for the exempt requests (the operator's HALT and the
	// health check) when every ordinary slot is taken.
	DefaultReserve = 64
	// MaxDefault caps DefaultMax: ten thousand connections is far above
	// what the agents of one host need at once, and each costs memory.
	MaxDefault = 10000
	// fallbackMax is DefaultMax when the open-file limit is unknown (the
	// common soft limit is 1024).
	fallbackMax = 512
	// rejectWriteTimeout bounds writing the fixed 503 to a connection
	// beyond every cap (a peer that does not read must not hold the
	// accept loop).
	rejectWriteTimeout = 100 * time.Millisecond
)

// reject is the answer of a connection beyond Max+Reserve.
const reject = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 48\r\n\r\n" +
	"the server holds all the connections it can now\n"

func capDefault(n uint64) int {
	if n > MaxDefault {
		return MaxDefault
	}
	return max(int(n), 1)
}

// Options configures a Listener.
type Options struct {
	// Max is the number of connections served as usual (> 0).
	Max int
	// Reserve is how many more are accepted for exempt requests only
	// (0: DefaultReserve).
	Reserve int
	// Pressure is called (in its own goroutine) when the count reaches
	// Max, and Relief when it falls below Max/2 again.
	Pressure, Relief func()
}

// Listener is a net.Listener that counts and bounds its connections.
type Listener struct {
	net.Listener
	max, hard int
	pressure  func()
	relief    func()

	open     atomic.Int64
	rejected atomic.Int64

	// mu serializes the pressure state changes.
	mu      sync.Mutex
	pressed bool
}

// Wrap bounds ln's connections.
func Wrap(ln net.Listener, o Options) *Listener {
	if o.Reserve <= 0 {
		o.Reserve = DefaultReserve
	}
	return &Listener{Listener: ln, max: o.Max, hard: o.Max + o.Reserve, pressure: o.Pressure, relief: o.Relief}
}

// Open is the number of connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Rejected is the number of connections refused beyond every cap.
func (l *Listener) Rejected() int64 { return l.rejected.Load() }

// Accept returns the next connection within Max+Reserve; those beyond are
// answered 503 and closed here.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		n := int(l.open.Add(1))
		if n > l.hard {
			l.open.Add(-1)
			l.rejected.Add(1)
			_ = c.SetWriteDeadline(time.Now().Add(rejectWriteTimeout))
			_, _ = c.Write([]byte(reject))
			_ = c.Close()
			continue
		}
		if n >= l.max {
			l.setPressure(true)
		}
		return &conn{Conn: c, l: l, over: n > l.max}, nil
	}
}

func (l *Listener) closed() {
	if n := int(l.open.Add(-1)); n < l.max/2 {
		l.setPressure(false)
	}
}

func (l *Listener) setPressure(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pressed == on {
		return
	}
	l.pressed = on
	switch {
	case on && l.pressure != nil:
		go l.pressure()
	case !on && l.relief != nil:
		go l.relief()
	}
}

// conn is a counted connection; over marks one beyond Max.
type conn struct {
	net.Conn
	l    *Listener
	over bool
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.l.closed)
	return err
}

type overKey struct{}

// ConnContext is the http.Server's ConnContext: it marks the requests of a
// connection beyond Max for Guard.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*conn); ok && cc.over {
		return context.WithValue(ctx, overKey{}, true)
	}
	return ctx
}

// Over reports whether the request came on a connection beyond Max.
func Over(r *http.Request) bool {
	v, _ := r.Context().Value(overKey{}).(bool)
	return v
}

// Guard answers the requests of connections beyond Max with 503 and closes
// them, except those exempt says may pass.
func Guard(next http.Handler, exempt func(*http.Request) bool, refuse func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Over(r) && !exempt(r) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			refuse(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
