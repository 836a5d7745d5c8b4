package loopback

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

// lo is an init whose loopback is the test's: it dials 127.0.0.1 on the
// host and hands the socket back, as the init does inside.
type lo struct{ err error }

func (l lo) Dial(ctx context.Context, port int) (*os.File, error) {
	if l.err != nil {
		return nil, l.err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", itoa(port)))
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	return c.(*net.TCPConn).File()
}

func itoa(n int) string { return (&net.TCPAddr{Port: n}).String()[1:] }

// box is a sandbox whose init is in (nil: refused with refuse), and which
// stops between the hold and the place when stops is set.
type box struct {
	in     Init
	refuse error
	stops  bool
	used   int
}

func (b *box) Init() (Init, error) {
	if b.in == nil {
		return nil, b.refuse
	}
	return b.in, nil
}
func (b *box) Still(in Init) bool { return !b.stops && in == b.in }
func (b *box) Used()              { b.used++ }

// TestDialReachesTheSandboxsLoopback: a dial to an allowed port of a
// running sandbox is a connection to what listens there, counted among
// the relayed ones and marking the sandbox used; every refusal (a port out
// of range or not allowed, a sandbox that cannot be reached, a failed
// dial, a stop in between) leaves no place held.
func TestDialReachesTheSandboxsLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback here: %v", err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hi"))
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	allowed := []uint16{uint16(port)} //nolint:gosec // G115: a listener's port
	var r Relays
	b := &box{in: lo{}}
	c, err := r.Dial(context.Background(), b, allowed, port)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read %q, %v: want what listens on the port", buf, err)
	}
	if r.Open() != 1 || b.used != 1 {
		t.Fatalf("open %d, used %d: want 1 and 1", r.Open(), b.used)
	}
	_ = c.Close()
	for _, tc := range []struct {
		name string
		b    *box
		port int
		want fault.Kind
	}{
		{"port 0", b, 0, fault.Invalid},
		{"port not allowed", b, port + 1, fault.Forbidden},
		{"paused", &box{refuse: fault.New(fault.Conflict, "sandbox is paused")}, port, fault.Conflict},
		{"the init went", &box{in: lo{err: agent.ErrGone}}, port, fault.Conflict},
		{"stopped in between", &box{in: lo{}, stops: true}, port, fault.Conflict},
	} {
		_, err := r.Dial(context.Background(), tc.b, allowed, tc.port)
		if fault.KindOf(err) != tc.want {
			t.Errorf("%s: %v, want a %s fault", tc.name, err, tc.want)
		}
		if r.Open() != 0 {
			t.Fatalf("%s: %d places held after a refusal", tc.name, r.Open())
		}
	}
}

// TestRelayClosesWhatItRefuses: a connection relayed into a sandbox that
// cannot be reached is closed; one into a running sandbox is counted and
// closed by CloseAll.
func TestRelayClosesWhatItRefuses(t *testing.T) {
	var r Relays
	a, peer := net.Pipe()
	defer func() { _ = peer.Close() }()
	if _, err := r.Relay(&box{refuse: errors.New("not running")}, a); err == nil {
		t.Fatal("relayed into a sandbox that cannot be reached")
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("the refused connection is still open")
	}
	c, p2 := net.Pipe()
	defer func() { _ = p2.Close() }()
	b := &box{in: lo{}}
	if _, err := r.Relay(b, c); err != nil || r.Open() != 1 || b.used != 1 {
		t.Fatalf("relay: %v, open %d, used %d", err, r.Open(), b.used)
	}
	r.CloseAll()
	if r.Open() != 0 {
		t.Fatalf("%d open after CloseAll", r.Open())
	}
}
