package sandboxinit

import (
	"errors"
	"os"
	"slices"
	"time"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"
)

// Reaching into a sandbox's own loopback (the preview proxy, the browser's
// DevTools port, the desktop's VNC server).
//
// The sandbox keeps its network namespace with only lo: nothing is
// forwarded or bridged. On OpDial the init, which lives in that namespace,
// connects to 127.0.0.1:port and passes the connected socket to the server
// (SCM_RIGHTS); the server relays bytes over it. Only Setup.LoopbackPorts
// are dialled — the same list landlock lets sandboxed code bind and
// connect — and never in network mode host, where 127.0.0.1 is the host's
// own loopback (the server's API, a database) and not the sandbox's.

// dialTimeout bounds one connect. On loopback a connect is answered at
// once (accepted or refused); only a listener with a full backlog leaves it
// pending, and a frozen or wedged listener must not hold the caller.
const dialTimeout = 5 * time.Second

// loopbackTCP is base plus the loopback ports, for landlock's lists; in
// host mode (all TCP allowed anyway) it is base.
func loopbackTCP(base []uint16, st proto.Setup) []uint16 {
	if st.HostNetwork || len(st.LoopbackPorts) == 0 {
		return base
	}
	out := slices.Clone(base)
	for _, p := range st.LoopbackPorts {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// dial connects to 127.0.0.1:r.Port inside the sandbox.
func (s *server) dial(r *proto.DialReq) (proto.Response, []*os.File, error) {
	switch {
	case s.setup.HostNetwork:
		return proto.Response{}, nil, &proto.Error{Code: "EPERM", Msg: "this sandbox shares the host's network; its loopback is the host's and is not reachable this way"}
	case r.Port < 1 || r.Port > 65535:
		return proto.Response{}, nil, proto.Invalidf("port %d is outside 1-65535", r.Port)
	case !slices.Contains(s.setup.LoopbackPorts, uint16(r.Port)): //nolint:gosec // G115: checked within 1-65535 above
		return proto.Response{}, nil, &proto.Error{Code: "EPERM", Msg: "port is not one of the sandbox's reachable loopback ports"}
	}
	fd, err := connectLoopback(r.Port, dialTimeout)
	if err != nil {
		return proto.Response{}, nil, err
	}
	return proto.Response{}, []*os.File{os.NewFile(uintptr(fd), "dial")}, nil //nolint:gosec // G115: a descriptor is non-negative
}

// connectLoopback connects a close-on-exec TCP socket to 127.0.0.1:port
// within timeout and returns it in blocking mode.
func connectLoopback(port int, timeout time.Duration) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	ok := false
	defer func() {
		if !ok {
			fds.Close(fd)
		}
	}()
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	if errors.Is(err, unix.EINPROGRESS) {
		err = waitConnected(fd, timeout)
	}
	if err != nil {
		return -1, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		return -1, err
	}
	ok = true
	return fd, nil
}

// waitConnected waits for a non-blocking connect to finish and returns its
// result.
func waitConnected(fd int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}} //nolint:gosec // G115: a descriptor fits int32
		n, err := unix.Poll(pfd, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soErr != 0 {
			return unix.Errno(soErr) //nolint:gosec // G115: SO_ERROR is an errno
		}
		return nil
	}
}
