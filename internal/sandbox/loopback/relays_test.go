package loopback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/fault"
)

// TestRelaysAreCapped: MaxConns places can be held at once; the next is
// refused with a conflict; a release or a Close gives a place back, and
// CloseAll closes every open connection.
func TestRelaysAreCapped(t *testing.T) {
	var r Relays
	var held []*Conn
	var releases []func()
	for range MaxConns {
		c, release, err := r.Hold()
		if err != nil {
			t.Fatalf("place %d: %v", len(held)+1, err)
		}
		held, releases = append(held, c), append(releases, release)
	}
	var fe *fault.Error
	if _, _, err := r.Hold(); !errors.As(err, &fe) || fe.Kind != fault.Conflict {
		t.Fatalf("past the cap: %v, want a conflict", err)
	}
	releases[0]()
	if r.Open() != MaxConns-1 {
		t.Fatalf("after a release %d open, want %d", r.Open(), MaxConns-1)
	}
	a, b := net.Pipe()
	defer func() { _ = b.Close() }()
	held[1].Conn = a
	if err := held[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := held[1].Close(); err != nil { // a second close gives no place back twice
		t.Fatal(err)
	}
	if r.Open() != MaxConns-2 {
		t.Fatalf("after a close %d open, want %d", r.Open(), MaxConns-2)
	}
	for _, c := range held[2:] {
		x, y := net.Pipe()
		defer func() { _ = y.Close() }()
		c.Conn = x
	}
	r.CloseAll()
	if r.Open() != 0 {
		t.Fatalf("after CloseAll %d open", r.Open())
	}
	if _, err := held[2].Write([]byte("x")); err == nil {
		t.Fatal("a connection CloseAll closed still writes")
	}
}

func TestPorts(t *testing.T) {
	got := Ports([]uint16{8080, 9222, 3000}, []uint16{9222, 5900})
	if want := []uint16{3000, 5900, 8080, 9222}; !slices.Equal(got, want) {
		t.Fatalf("Ports = %v, want %v", got, want)
	}
}

func TestDialFault(t *testing.T) {
	cases := []struct {
		err  error
		kind fault.Kind
	}{
		{&agent.Error{Code: "ECONNREFUSED", Msg: "refused"}, fault.Unavailable},
		{&agent.Error{Code: "ETIMEDOUT", Msg: "timed out"}, fault.Timeout},
		{fmt.Errorf("dial: %w", agent.ErrGone), fault.Conflict},
		{errors.New("something else"), fault.Internal},
	}
	for _, c := range cases {
		if got := fault.KindOf(DialFault(3000, c.err)); got != c.kind {
			t.Errorf("DialFault(%v) is %v, want %v", c.err, got, c.kind)
		}
	}
	if err := DialFault(3000, context.Canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled dial: %v", err)
	}
}
