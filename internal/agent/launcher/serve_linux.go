package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"
	"golang.org/x/sys/unix"
)

// Serve is the launcher's main: it serves launch requests on its
// inherited socket until the server closes it.
func Serve() error {
	// Only the socket is the launcher's; a memfd it was run from and
	// whatever else the starter left inheritable is closed now.
	if err := fds.CloseInherited(FDConn + 1); err != nil {
		return err
	}
	// Not dumpable: no process of the same uid may ptrace it or read its
	// memory and descriptors through /proc.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("launcher: not dumpable: %w", err)
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("launcher: open /dev/null: %w", err)
	}
	buf := make([]byte, MaxRequest)
	oob := make([]byte, unix.CmsgSpace(MaxFiles*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(FDConn, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("launcher: receive: %w", err)
		}
		if n == 0 && oobn == 0 {
			return nil // the server closed its end
		}
		got, ferr := Rights(oob[:oobn])
		var rep Reply
		pidfd := -1
		if ferr != nil {
			rep.Err = ferr.Error()
		} else {
			rep, pidfd = serveLaunch(buf[:n], got, null)
		}
		for _, fd := range got {
			fds.Close(fd)
		}
		if err := sendReply(rep, pidfd); err != nil {
			return err
		}
	}
}

// rightsOf returns the descriptors of a control message.
func Rights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var out []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		out = append(out, got...)
	}
	return out, nil
}

func sendReply(rep Reply, pidfd int) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("launcher: encode reply: %w", err)
	}
	var oob []byte
	if pidfd >= 0 {
		oob = unix.UnixRights(pidfd)
		defer fds.Close(pidfd)
	}
	for {
		err = unix.Sendmsg(FDConn, b, oob, nil, 0)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("launcher: send: %w", err)
	}
	return nil
}

// serveLaunch clones one init as Launch does, but as the server's child.
// It returns the pid and a pidfd of the init, or an error in the reply
// (no host path in it: the server's client sees only that the start
// failed, the operator the reply in the log).
func serveLaunch(b []byte, rights []int, null int) (Reply, int) {
	var req Request
	if err := json.Unmarshal(b, &req); err != nil {
		return Reply{Err: "bad request"}, -1
	}
	if len(rights) != req.Files() {
		return Reply{Err: fmt.Sprintf("request carries %d descriptors, want %d", len(rights), req.Files())}, -1
	}
	if len(req.Argv) == 0 || (req.Path == "") == !req.ExeFile {
		return Reply{Err: "request names no program"}, -1
	}
	if req.HostUID < IDRange || req.HostGID < IDRange {
		// A sandbox's range never starts among the host's own accounts:
		// uid 0 inside would be one of them outside.
		return Reply{Err: "host id range overlaps the host's accounts"}, -1
	}
	sock, rest := rights[0], rights[1:]
	stderr := null
	if req.Stderr {
		stderr, rest = rest[0], rest[1:]
	}
	files := []uintptr{uintptr(null), uintptr(null), uintptr(stderr), uintptr(sock)} //nolint:gosec // G115: descriptors are small and non-negative
	path := req.Path
	if req.ExeFile {
		// Descriptor 4 is closed in the child (-1); the program is 5.
		files = append(files, ^uintptr(0), uintptr(rest[0])) //nolint:gosec // G115: as above
		rest = rest[1:]
		path = "/proc/self/fd/" + strconv.Itoa(proto.FDExe)
	}
	pidfd := -1
	sys := SysProcAttr(req.HostUID, req.HostGID, req.HostNetwork)
	// The init is the server's child, not the launcher's: the server
	// reaps it, and its Pdeathsig follows the server.
	sys.Cloneflags |= unix.CLONE_PARENT
	sys.PidFD = &pidfd
	if req.Cgroup {
		sys.UseCgroupFD = true
		sys.CgroupFD = rest[0]
	}
	var pid int
	err := AsOwner(req.HostUID, req.HostGID, func() error {
		var err error
		pid, err = syscall.ForkExec(path, req.Argv, &syscall.ProcAttr{Dir: "/", Env: req.Env, Files: files, Sys: sys}) //nolint:gosec // G204: the init program the server named over its own inherited socket, never client input
		return err
	})
	if err != nil {
		return Reply{Err: "clone and exec the init: " + errnoText(err)}, -1
	}
	if pidfd < 0 {
		// CLONE_PIDFD is there on every kernel with clone3 (5.3); without
		// a pidfd the server could not supervise the init safely.
		_ = unix.Kill(pid, unix.SIGKILL)
		return Reply{Err: "no pidfd for the init"}, -1
	}
	return Reply{Pid: pid}, pidfd
}

// errnoText is an error's errno text, never a path.
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "failed"
}
