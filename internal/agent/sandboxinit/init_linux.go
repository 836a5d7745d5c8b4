package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sandhold/sandhold/internal/agent/fds"
	"github.com/sandhold/sandhold/internal/agent/proto"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/caps"
	"github.com/sandhold/sandhold/internal/isolate/landlock"
	"github.com/sandhold/sandhold/internal/isolate/rootfs"
	"github.com/sandhold/sandhold/internal/isolate/seccomp/compiled"
)

// Main is "sandhold init": it sets the sandbox up and serves the server
// until the protocol socket closes. It returns only on failure or when the
// server went away; the process then exits and the kernel kills everything
// else in the sandbox's pid namespace.
func Main() error {
	if os.Getpid() != 1 {
		return errors.New("sandhold init runs only as a sandbox's PID 1, started by the server")
	}
	// The main goroutine keeps its thread for itself: that thread makes
	// the sandbox's cgroup namespace and forks every command (see
	// forkLoop).
	runtime.LockOSThread()
	if len(os.Args) > 0 && os.Args[0] == ResumeName {
		// Woken from the keeper (sleep_linux.go).
		return resume()
	}
	// The init's own program, kept for the keeper when one is linked.
	exe := -1
	if keeperLinked {
		exe = keptExe(proto.FDExe)
	}
	// Only descriptors 0-4 are the init's; whatever else the process
	// that started it left inheritable is closed before anything else.
	if err := fds.CloseInherited(proto.FDWorkspace + 1); err != nil {
		return err
	}
	// What the keeper's exec must hand on (sleep_linux.go): the
	// bounding set and timer slack this thread starts with.
	bset, err := caps.ThreadBounding()
	if err != nil {
		return err
	}
	slack, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("read timer slack: %w", err)
	}
	// The runtime's watchdog thread polls every 20 µs after each wake-up;
	// here that cost as much CPU per command as the fork (see
	// sysmon_linux.go). Only speed depends on it.
	if err := slowSysmon(); err != nil {
		fmt.Fprintln(os.Stderr, "sandhold init: runtime tuning skipped:", err)
	}
	hostNS, err := nsInode("/proc/thread-self/ns/cgroup")
	if err != nil {
		return err
	}
	// The signals PID 1 catches and drops, and its name: processSettings.
	if err := processSettings(); err != nil {
		return err
	}
	conn, err := adoptProto()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

	// The setup and its answer go through types of their own (setupMsg):
	// the first use of Request and Response builds the JSON codec of every
	// message, ≈ 1.3 ms here on every cold start's path; warmCodecs builds
	// them once the start is answered.
	var req setupMsg
	files, err := conn.Recv(&req)
	if err != nil {
		return fmt.Errorf("read setup: %w", err)
	}
	if req.Op != proto.OpSetup || req.Setup == nil || len(files) != req.Setup.SetupFiles() {
		proto.CloseAll(files)
		return fmt.Errorf("first request is %q with %d descriptors, want setup with the workspace (and a template root's)", req.Op, len(files))
	}
	// The workspace, and a template root's writable layer and layers
	// (close-on-exec, as everything Recv returns); setup closes them once
	// they are attached.
	s := newServer(conn, *req.Setup)
	noSleep := sleepDisabled(*req.Setup, exe)
	layers, egress, err := setup(*req.Setup, hostNS, noSleep, files)
	if err == nil {
		// Opened after the root is built, so it is the sandbox's own.
		s.devNull, err = unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("open /dev/null: %w", err)
		}
	}
	if err != nil {
		_ = conn.Send(readyMsg{ID: req.ID, Err: proto.ToError(err)})
		return err
	}
	if err := conn.Send(readyMsg{ID: req.ID, Ready: &proto.Ready{Layers: layers}}); err != nil {
		return err
	}
	warmCodecs()
	if noSleep == "" {
		s.sleep = newSleeper(s, exe, bset, slack)
	} else if exe >= 0 {
		_ = unix.Close(exe)
	}
	return s.run(egress)
}

// setupMsg is the part of Request a setup message uses, and readyMsg the
// part of Response its answer uses: the same wire form
// (TestSetupMessagesAreRequestAndResponse), for a smaller codec to build
// while the server waits for the start.
type setupMsg struct {
	ID    uint64       `json:"id"`
	Op    proto.Op     `json:"op"`
	Setup *proto.Setup `json:"setup,omitempty"`
}

type readyMsg struct {
	ID    uint64       `json:"id"`
	Err   *proto.Error `json:"err,omitempty"`
	Ready *proto.Ready `json:"ready,omitempty"`
}

// warmCodecs builds the JSON codecs of Request and Response once the start
// is answered, while the server finishes the create: the first command's
// request would otherwise build them on its own path. (Built on another
// thread beside the setup instead, they took as long as before from the
// setup: both CPUs are busy then.)
func warmCodecs() {
	var r proto.Request
	_ = json.Unmarshal([]byte(`{}`), &r)
	_, _ = json.Marshal(proto.Response{})
}

// run starts the egress relay (egress >= 0), arms the idle paths and
// serves until the protocol socket closes.
func (s *server) run(egress int) error {
	if egress >= 0 {
		eg, err := newEgressRelay(s, egress)
		if err != nil {
			return err
		}
		s.egress = eg
	}
	// What the binary's package initialisation and the setup allocated is
	// garbage now. It is not given back at once (the first command would
	// fault much of it in again): the idle paths are armed as by a
	// request, and an init that stays idle returns it or sleeps.
	s.release.note()
	if s.sleep != nil {
		s.sleep.note()
	}
	served := make(chan error, 1)
	go func() { served <- s.serve() }()
	return s.forkLoop(served)
}

// adoptProto takes the protocol socket inherited on proto.FDConn (Main, and
// resume after a wake): NewConn holds a close-on-exec duplicate, and the
// inherited descriptor (not close-on-exec) is closed at once, so no
// command can inherit the protocol socket.
func adoptProto() (*proto.Conn, error) {
	f := os.NewFile(proto.FDConn, "proto")
	conn, err := proto.NewConn(f)
	_ = f.Close()
	return conn, err
}

// processSettings are what the init sets on itself as a process, at start
// and again after a wake (execve resets them).
func processSettings() error {
	// PID 1 takes no signal from anyone: the ones the runtime would act
	// on (most end a Go program) get their default disposition back,
	// and the kernel drops every signal with the default action that is
	// sent to a pid namespace's init, from inside and from the host, but
	// an ancestor's SIGKILL. Not ignored: an ignored signal stays ignored
	// across exec and every command would inherit that (no Ctrl-C, no
	// traps, `yes | head` getting EPIPE); a default one is what commands
	// should start with. Not caught through os/signal either, which
	// keeps two threads for as long as the process lives
	// (threads_linux.go). TestInitIgnoresSignals.
	// SIGCHLD too: the reaper waits in the kernel (reap), and a default
	// SIGCHLD is dropped without interrupting a thread for the runtime's
	// handler (not ignored: ignoring it would have the kernel collect
	// children and lose their exit codes).
	defaultSignals(unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
		unix.SIGPIPE, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGCHLD)
	// The Go runtime turns an EPIPE on os.Stderr (descriptor 2) into an
	// exit when SIGPIPE is not caught; the init's own messages go through
	// a duplicate, where an EPIPE is only an error; above the numbers
	// the keeper's exec needs free (sleeper.moves).
	if fd, err := unix.FcntlInt(2, unix.F_DUPFD_CLOEXEC, proto.FDExe+1); err == nil {
		os.Stderr = os.NewFile(uintptr(fd), "stderr")
	}
	resetIgnoredSignals()
	// Run from a memfd, the kernel names the process after its path
	// ("5"); ps and top should say what it is.
	if name, err := unix.BytePtrFromString("sandhold-init"); err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0) //nolint:gosec // G103: a NUL-terminated constant for prctl
	}
	// Not dumpable: /proc/1 is then closed to every process in the sandbox,
	// root included, since none has CAP_SYS_PTRACE.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set non-dumpable: %w", err)
	}
	return nil
}

// setup builds the sandbox and applies the layers in order. The order
// matters: mounts need CAP_SYS_ADMIN of the namespace, so the root comes
// first; landlock and the bounding set next; seccomp last, because it
// forbids the calls the earlier steps make.
//
// With st.EgressListen it returns the egress listener (opened before
// landlock, which forbids binding), else -1.
//
// It runs on the thread that forks every command: hostNS is the inode of
// the cgroup namespace that thread started in. files are the descriptors
// the setup request carried (Setup.SetupFiles); setup closes them.
//
// noSleep says why the init cannot sleep ("" if it can).
func setup(st proto.Setup, hostNS uint64, noSleep string, files []*os.File) ([]proto.Layer, int, error) {
	layers, egress, err := setupLayers(st, hostNS, noSleep, files)
	proto.CloseAll(files) // a no-op for those attached
	if err != nil && egress >= 0 {
		_ = unix.Close(egress)
		egress = -1
	}
	return layers, egress, err
}

func setupLayers(st proto.Setup, hostNS uint64, noSleep string, files []*os.File) ([]proto.Layer, int, error) {
	egress := -1
	// The init is PID 1 of namespaces the server created for it.
	nsDetail := "user (uid 1000 inside, unprivileged range outside), mount, pid, ipc, uts, net"
	if st.HostNetwork {
		nsDetail = "user (uid 1000 inside, unprivileged range outside), mount, pid, ipc, uts; NOT net (network.mode host)"
	}
	layers := []proto.Layer{{Name: "namespaces", Active: true, Detail: nsDetail}}
	add := func(name string, err error) error {
		if err == nil {
			layers = append(layers, proto.Layer{Name: name, Active: true})
			return nil
		}
		if st.Insecure {
			layers = append(layers, proto.Layer{Name: name, Active: false, Detail: err.Error()})
			return nil
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	// The cgroup namespace is made here, after the server placed this
	// process in the sandbox's group, so the sandbox sees that group as
	// its root and learns nothing of the host's hierarchy (see
	// enterCgroupNS for why one thread is enough).
	nsDetail, nsErr := enterCgroupNS(hostNS, noSleep == "")
	if err := add("cgroup namespace", nsErr); err != nil {
		return layers, egress, err
	}
	if nsErr == nil {
		layers[len(layers)-1].Detail = nsDetail
	}
	err := rootfs.Build(rootfs.Spec{
		Hostname:    st.Hostname,
		UID:         st.UID,
		GID:         st.GID,
		WorkspaceFD: int(files[0].Fd()), //nolint:gosec // G115: a descriptor number
		TmpBytes:    st.TmpBytes,
		ShmBytes:    st.ShmBytes,
		Overlay:     overlayOf(st, files),
		MaxPTYs:     st.PTYLimit(),
		Sysctls:     sysctls(st.Kernel),
	})
	proto.CloseAll(files)
	if err != nil {
		// Without its root a sandbox is nothing; insecure or not.
		return layers, egress, fmt.Errorf("root file system: %w", err)
	}
	rootDetail := "tmpfs root, read-only /usr, synthetic /etc, pivot_root"
	writable := []string{rootfs.Workspace, "/tmp", "/dev/shm", "/dev/pts"}
	if st.Root != nil {
		rootDetail = fmt.Sprintf("overlay root of template %s: %d read-only id-mapped layers, writable layer in the workspace image (limits.disk); the host's /usr not visible; pivot_root", st.Root.Template, st.Root.Layers)
		if writable, err = rootfs.OverlayWritable(); err != nil {
			return layers, egress, fmt.Errorf("root file system: %w", err)
		}
	}
	rootDetail += fmt.Sprintf("; devpts of its own, at most %d terminals", st.PTYLimit())
	layers = append(layers, proto.Layer{Name: "root file system", Active: true, Detail: rootDetail})
	kDetail, kErr := kernelCounts(st.Kernel, st.PTYLimit())
	if err := add("shared kernel resources", kErr); err != nil {
		return layers, egress, err
	}
	if kErr == nil {
		layers[len(layers)-1].Detail = kDetail
	}
	if st.HostNetwork {
		// An admin chose to share the host's network: say so in the
		// layers rather than pretend.
		layers = append(layers, proto.Layer{Name: "network namespace (lo only)", Active: false,
			Detail: "network.mode host: the host's network is shared (admin choice, SANDBOX_NETWORK_RESTRICTED=false)"})
	} else if err := add("network namespace (lo only)", rootfs.LoopbackUp()); err != nil {
		return layers, egress, err
	}
	if st.EgressListen && !st.HostNetwork {
		// Bound now: landlock (next) forbids sandboxed code, this init
		// included, to bind any TCP port.
		fd, err := listenEgress()
		if err != nil {
			return layers, egress, fmt.Errorf("egress listener: %w", err)
		}
		egress = fd
		layers = append(layers, proto.Layer{Name: "egress proxy listener", Active: true,
			Detail: fmt.Sprintf("127.0.0.1:%d inside relays to the server's allowlist proxy; TCP connect allowed to %v and the %d loopback ports only", proto.EgressPort, st.TCPConnect, len(st.LoopbackPorts))})
	}
	rules := landlock.Rules{
		ReadOnly:       []string{"/"},
		ReadWrite:      writable,
		ReadWriteFiles: []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"},
		TCPConnect:     loopbackTCP(st.TCPConnect, st),
		TCPBind:        loopbackTCP(st.TCPBind, st),
		AllowAllTCP:    st.HostNetwork,
	}
	llStatus, llErr := landlock.ApplyWithStatus(rules)
	if err := add("landlock", llErr); err != nil {
		return layers, egress, err
	}
	if llErr == nil {
		layers[len(layers)-1].Detail = fmt.Sprintf("ABI %d; writable: %v; TCP restricted: %v; signals scoped: %v; abstract unix sockets scoped: %v",
			llStatus.ABI, rules.ReadWrite, llStatus.TCPRestricted, llStatus.ScopedSignals, llStatus.ScopedAbstractUnix)
	}
	if err := add("capabilities (bounding set empty)", dropCaps(noSleep == "")); err != nil {
		return layers, egress, err
	}
	if layers[len(layers)-1].Active {
		d := "empty on the init's thread that forks every command, so every command starts with none; idle sleep: " +
			"in a keeper, exec'd from another thread of the init, which keeps the init's set for it"
		if noSleep != "" {
			d = "empty on every thread of the init; idle sleep: " + noSleep
		}
		layers[len(layers)-1].Detail = d
	}
	// The policy's program from package seccomp, compiled at build time:
	// the compiler's library costs every process that links it 190-260 kB
	// (see package compiled).
	if err := add("seccomp", compiled.Install()); err != nil {
		return layers, egress, err
	}
	if st.Insecure {
		// Seccomp sets no_new_privs; without it, set it on its own.
		_ = caps.SetNoNewPrivs()
	}
	layers = append(layers, proto.Layer{Name: "no_new_privs", Active: true})
	return layers, egress, nil
}

// overlayOf is the template root the setup's descriptors make, or nil for
// a host-template sandbox.
func overlayOf(st proto.Setup, files []*os.File) *rootfs.Overlay {
	if st.Root == nil {
		return nil
	}
	o := &rootfs.Overlay{WritableFD: int(files[1].Fd())} //nolint:gosec // G115: a descriptor number
	for _, f := range files[2:] {
		o.LayerFDs = append(o.LayerFDs, int(f.Fd())) //nolint:gosec // G115: a descriptor number
	}
	return o
}

// dropCaps empties the ambient set of every thread and the bounding set
// of the calling thread, the one that forks every command (forkLoop). An
// init that can sleep keeps its other threads' bounding set: they fork
// nothing, and one of them executes the keeper (sleep_linux.go). One that
// cannot sleep has no use for it and empties every thread's.
func dropCaps(canSleep bool) error {
	drop := caps.DropBoundingSet
	if canSleep {
		drop = caps.DropBoundingSetThread
	}
	if err := drop(); err != nil {
		return err
	}
	return caps.ClearAmbient()
}

// server serves requests after setup.
type server struct {
	conn  *proto.Conn
	setup proto.Setup

	// mu guards children. It is held across fork so the reaper cannot
	// reap a child before it is registered.
	mu       sync.Mutex
	children map[int]uint64 // pid → spawn request id
	// forked wakes the reaper after a fork (reap); reapMu is held for
	// each of its passes (reapAll).
	forked chan struct{}
	reapMu sync.Mutex

	// forks carries spawn requests to forkLoop, on the thread in the
	// sandbox's cgroup namespace.
	forks chan spawnJob
	// lost is set, on forkLoop's thread only, when that thread could not
	// return from an execution's group; forkLoop then ends the init.
	lost error
	// devNull is /dev/null, opened once (close-on-exec): the stdin of
	// every command that gets none.
	devNull int
	// release gives memory back once requests stop (release_linux.go).
	release *idleRelease
	// sleep makes an idle init sleep in its keeper (sleep_linux.go); nil
	// when it cannot.
	sleep *sleeper
	// egress relays the egress listener's connections; nil without one.
	egress *egressRelay
	// busy counts requests read and not yet answered.
	busy atomic.Int64
}

// spawnQueue is how many spawn requests may wait for forkLoop before the
// protocol loop stops reading: enough for the server's concurrent
// executions per sandbox, small enough to be no buffer of note.
const spawnQueue = 32

func newServer(conn *proto.Conn, st proto.Setup) *server {
	return &server{conn: conn, setup: st, children: make(map[int]uint64), forked: make(chan struct{}, 1), forks: make(chan spawnJob, spawnQueue), devNull: -1,
		release: newIdleRelease()}
}

func (s *server) serve() error {
	// The reaper runs before the first request is read (reap).
	go s.reap()
	for {
		var req proto.Request
		files, err := s.conn.Recv(&req)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if req.Op == proto.OpSleep {
			// The server's leave to sleep (sleeper.fire asked for it):
			// not a call. Read here, between two messages, so nothing
			// is read meanwhile; sleep, or carry on if the init was
			// called since it asked or something is under way.
			proto.CloseAll(files)
			if s.sleep != nil {
				s.sleep.granted()
			}
			continue
		}
		s.busy.Add(1)
		s.release.note()
		if s.sleep != nil {
			s.sleep.note()
		}
		if req.Op == proto.OpSpawn {
			// Served whole on forkLoop's thread (see there).
			s.forks <- spawnJob{req: req, files: files}
			continue
		}
		go s.handle(req, files)
	}
}

func (s *server) handle(req proto.Request, files []*os.File) {
	defer s.busy.Add(-1)
	resp, out, err := s.dispatch(req, files)
	proto.CloseAll(files)
	resp.ID = req.ID
	if err != nil {
		resp = proto.Response{ID: req.ID, Err: proto.ToError(err)}
		proto.CloseAll(out)
		out = nil
	}
	_ = s.conn.Send(resp, out...)
	proto.CloseAll(out)
}

func (s *server) dispatch(req proto.Request, files []*os.File) (proto.Response, []*os.File, error) {
	switch req.Op {
	case proto.OpPing:
		return proto.Response{}, nil, nil
	case proto.OpSpawn:
		if req.Spawn == nil {
			return proto.Response{}, nil, proto.Invalidf("spawn without arguments")
		}
		return s.spawn(req.ID, req.Spawn, files)
	case proto.OpOpen, proto.OpStat, proto.OpLstat, proto.OpReadDir, proto.OpMkdir, proto.OpRename, proto.OpRemove, proto.OpSymlink, proto.OpReadlink:
		if req.File == nil {
			return proto.Response{}, nil, proto.Invalidf("%s without arguments", req.Op)
		}
		return s.file(req.Op, req.File)
	case proto.OpResolve, proto.OpOpenRead, proto.OpWalk, proto.OpGrep:
		if req.File == nil {
			return proto.Response{}, nil, proto.Invalidf("%s without arguments", req.Op)
		}
		return s.workspaceOp(req.Op, req.File)
	case proto.OpExtract, proto.OpPack, proto.OpStatFS:
		if req.Transfer == nil {
			return proto.Response{}, nil, proto.Invalidf("%s without arguments", req.Op)
		}
		return s.transferOp(req.Op, req.Transfer, files)
	case proto.OpDial:
		if req.Dial == nil {
			return proto.Response{}, nil, proto.Invalidf("dial without arguments")
		}
		return s.dial(req.Dial)
	case proto.OpSetup:
		return proto.Response{}, nil, proto.Invalidf("setup happens once")
	}
	return proto.Response{}, nil, proto.Invalidf("unknown op %q", req.Op)
}
