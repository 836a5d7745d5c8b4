package browser

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestRelayRedialReplacesAndCloseEndsIt(t *testing.T) {
	first, firstPeer := net.Pipe()
	defer func() { _ = firstPeer.Close() }()
	var opened []net.Conn
	r := &Relay{Conn: first, redial: func(context.Context) (net.Conn, error) {
		c, peer := net.Pipe()
		opened = append(opened, peer)
		return c, nil
	}}
	second, err := r.Redial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Conn != second {
		t.Fatal("the relay does not hold the new connection")
	}
	if !closed(first) {
		t.Fatal("the old connection is still open")
	}
	// Close (a revocation) closes the current connection, and a
	// redial afterwards is refused and leaves nothing open.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !closed(second) {
		t.Fatal("Close left the current connection open")
	}
	if _, err := r.Redial(context.Background()); !errors.Is(err, errRelayClosed) {
		t.Fatalf("redial after close: %v", err)
	}
	if !closed(opened[len(opened)-1]) {
		t.Fatal("the connection made by a refused redial was left open")
	}
	if _, err := (&Relay{Conn: first}).Redial(context.Background()); err == nil {
		t.Fatal("a relay without redial redialled")
	}
}

// closed reports whether c (a net.Pipe end, or its peer) was closed: an
// open pipe's write would block, so a short deadline makes it a timeout.
func closed(c net.Conn) bool {
	_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Write([]byte("x"))
	return errors.Is(err, io.ErrClosedPipe)
}
