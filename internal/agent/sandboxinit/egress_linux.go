package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/sandhold/sandhold/internal/agent/proto"

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
	sa := &unix.SockaddrInet4{Port: proto.EgressPort, Addr: [4]byte{127, 0, 0, 1}}
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

// egressRelay accepts connections on the egress listener and hands each
// to the server. It can be stopped between connections (an init that goes
// to sleep leaves the rest queued in the listener, where its keeper sees
// them) and started again.
type egressRelay struct {
	s  *server
	fd int // the listener, non-blocking; f owns it
	f  *os.File
	rc syscall.RawConn
	// done is closed when the accept loop ended and every connection it
	// accepted was handed over.
	done chan struct{}
}

// newEgressRelay takes over the listener fd (close-on-exec) and starts it.
func newEgressRelay(s *server, fd int) (*egressRelay, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("egress listener: %w", err)
	}
	// A non-blocking descriptor gives a file the runtime's poller waits
	// on, with deadlines; f.Fd() is never called (it would make the
	// descriptor blocking again).
	f := os.NewFile(uintptr(fd), "egress-listener")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("egress listener: %w", err)
	}
	e := &egressRelay{s: s, fd: fd, f: f, rc: rc}
	e.start()
	return e, nil
}

func (e *egressRelay) start() {
	_ = e.f.SetReadDeadline(time.Time{})
	e.done = make(chan struct{})
	go e.serve(e.done)
}

// stop ends the accept loop and waits until the connections it accepted
// are with the server.
func (e *egressRelay) stop() {
	_ = e.f.SetReadDeadline(time.Now())
	<-e.done
}

// serve accepts connections until stopped or the listener fails.
func (e *egressRelay) serve(done chan struct{}) {
	pending := make(chan *os.File, maxPendingConns)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for f := range pending {
			// A send fails only when the server is gone; the init then
			// exits anyway. The descriptor is the server's now.
			_ = e.s.conn.Send(proto.Response{Kind: proto.EventConn}, f)
			_ = f.Close()
		}
	}()
	defer func() {
		close(pending)
		<-sent
		close(done)
	}()
	for {
		nfd, err := e.accept()
		switch {
		case err == nil:
			pending <- os.NewFile(uintptr(nfd), "egress-conn")
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, os.ErrClosed):
			return
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
		case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ENOMEM):
			time.Sleep(acceptBackoff)
		default:
			return
		}
	}
}

// accept waits for one connection; the connection's descriptor is
// blocking and close-on-exec.
func (e *egressRelay) accept() (int, error) {
	nfd := -1
	var aerr error
	err := e.rc.Read(func(fd uintptr) bool {
		nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
		return !errors.Is(aerr, unix.EAGAIN)
	})
	if err != nil {
		return -1, err
	}
	return nfd, aerr
}
