package agent

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The egress listener of a sandbox in network mode proxy.
//
// The sandbox's network namespace holds only lo, so nothing inside can
// reach the host or the world. The init, before landlock applies, listens
// on 127.0.0.1:EgressPort inside that namespace; landlock then lets
// sandboxed code connect to that one TCP port and bind none. Every accepted
// connection is passed to the server as an EventConn message (SCM_RIGHTS):
// the server's egress proxy reads the HTTP or CONNECT request from it and
// applies the sandbox's allowlist. The init never parses a byte of it.

// Caps with their reasons.
const (
	// maxPendingConns bounds the connections the init has accepted but not
	// yet handed to the server, and the listen backlog. A sandbox that
	// connects in a loop fills the kernel's queue (and then waits), not
	// the init's descriptor table or memory; the server caps concurrent
	// proxied connections per sandbox on its side.
	maxPendingConns = 32
	// acceptBackoff is the pause after accept fails for lack of
	// descriptors, so the loop does not spin.
	acceptBackoff = 100 * time.Millisecond
)

// listenEgress opens 127.0.0.1:EgressPort, blocking, close-on-exec.
func listenEgress() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	sa := &unix.SockaddrInet4{Port: EgressPort, Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, maxPendingConns); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// serveEgress accepts connections until the listener fails and hands each
// to the server. It runs for the init's life.
func (s *server) serveEgress(fd int) {
	pending := make(chan *os.File, maxPendingConns)
	go func() {
		for f := range pending {
			// A send fails only when the server is gone; the init then
			// exits anyway. The descriptor is the server's now.
			_ = s.conn.Send(Response{Kind: EventConn}, f)
			_ = f.Close()
		}
	}()
	defer close(pending)
	for {
		nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
		switch {
		case err == nil:
			pending <- os.NewFile(uintptr(nfd), "egress-conn")
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
		case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ENOMEM):
			time.Sleep(acceptBackoff)
		default:
			return
		}
	}
}
