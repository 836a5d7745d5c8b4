package proto

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/isolate/rootfs"
)

// MaxMessage caps one protocol message. Everything bulky travels as file
// descriptors, so 1 MiB is generous (a readdir page of MaxDirEntries names).
const MaxMessage = 1 << 20

// maxFDs caps the descriptors accepted with one message: a spawn carries at
// most one cgroup file per v1 hierarchy, a reply at most three pipes; a
// setup the workspace and a template root's writable layer and layers.
const maxFDs = 2 + rootfs.MaxLayers

// Op names a request.
type Op string

// The requests the init serves.
const (
	OpSetup    Op = "setup"
	OpPing     Op = "ping"
	OpSpawn    Op = "spawn"
	OpOpen     Op = "open"
	OpStat     Op = "stat"
	OpLstat    Op = "lstat"
	OpReadDir  Op = "readdir"
	OpMkdir    Op = "mkdir"
	OpRename   Op = "rename"
	OpRemove   Op = "remove"
	OpSymlink  Op = "symlink"
	OpReadlink Op = "readlink"
	// The workspace ops (walk.go): a kernel-resolved path, a regular file
	// opened for reading, and bounded tree walks and searches that would
	// otherwise cost a round trip per entry.
	OpResolve  Op = "resolve"
	OpOpenRead Op = "openread"
	OpWalk     Op = "walk"
	OpGrep     Op = "grep"
	// OpDial connects to a TCP port on the sandbox's own loopback and
	// passes the connected socket back (sandboxinit/dial_linux.go).
	OpDial Op = "dial"
	// OpSleep grants an idle init the sleep it asked for (EventSleep):
	// no reply, and not a request that ends the init's quiet period. An
	// init that has been called since it asked, or is no longer idle,
	// stays awake (sandboxinit/sleep_linux.go).
	OpSleep Op = "sleep"
)

// Request is one message from the server to the init.
type Request struct {
	ID    uint64    `json:"id"`
	Op    Op        `json:"op"`
	Setup *Setup    `json:"setup,omitempty"`
	Spawn *SpawnReq `json:"spawn,omitempty"`
	File  *FileReq  `json:"file,omitempty"`
	// Transfer is the argument of the transfer ops (transfer.go).
	Transfer *TransferReq `json:"transfer,omitempty"`
	// Dial is the argument of OpDial.
	Dial *DialReq `json:"dial,omitempty"`
}

// DialReq asks the init for a connection to 127.0.0.1:Port inside the
// sandbox's network namespace.
type DialReq struct {
	Port int `json:"port"`
}

// Event kinds of unsolicited messages from the init.
const (
	EventExit = "exit"
	// EventConn carries one connection accepted on the sandbox's egress
	// listener (127.0.0.1:EgressPort inside) as its only descriptor; the
	// server hands it to the egress proxy. See sandboxinit/egress_linux.go.
	EventConn = "conn"
	// EventSleep asks the server for leave to sleep: the init has been
	// idle for its quiet period. The server answers with an OpSleep
	// request when it lets it (at once, or once no sandbox is being
	// created: sandbox/sleepgate).
	EventSleep = "sleep"
)

// EgressPort is where the init listens inside a sandbox in network mode
// proxy; HTTP_PROXY points there.
const EgressPort = 3128

// Response is one message from the init: the reply to Request ID, or an
// event when Kind is set.
type Response struct {
	ID    uint64     `json:"id"`
	Kind  string     `json:"kind,omitempty"`
	Err   *Error     `json:"err,omitempty"`
	Ready *Ready     `json:"ready,omitempty"`
	Spawn *SpawnResp `json:"spawn,omitempty"`
	Exit  *Exit      `json:"exit,omitempty"`
	File  *FileResp  `json:"file,omitempty"`
	// Transfer is the reply to a transfer op (transfer.go).
	Transfer *TransferResp `json:"transfer,omitempty"`
}

// Setup carries the sandbox's parameters; see internal/isolate/rootfs for
// what the root holds.
type Setup struct {
	Hostname string `json:"hostname"`
	// UID and GID of the sandbox user inside the user namespace.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// AllowRoot lets spawns run as uid 0 inside the namespace
	// (SANDBOX_ENABLE_SUDO with sudo: true).
	AllowRoot bool  `json:"allow_root"`
	TmpBytes  int64 `json:"tmp_bytes"`
	ShmBytes  int64 `json:"shm_bytes"`
	// TCPConnect and TCPBind are the only TCP ports landlock lets sandboxed
	// code use (empty: none).
	TCPConnect []uint16 `json:"tcp_connect,omitempty"`
	TCPBind    []uint16 `json:"tcp_bind,omitempty"`
	// CgroupVersion tells the init how spawn requests attach cgroups.
	CgroupVersion int `json:"cgroup_version"`
	// Insecure lets layers that the kernel lacks be skipped (reported in
	// Ready) instead of failing the setup: --insecure-no-isolation.
	Insecure bool `json:"insecure,omitempty"`
	// EgressListen makes the init listen on 127.0.0.1:EgressPort before
	// landlock applies and pass every accepted connection to the server
	// (EventConn): network mode proxy. TCPConnect should then hold
	// EgressPort.
	EgressListen bool `json:"egress_listen,omitempty"`
	// HostNetwork is network mode host: the init was started without a
	// network namespace of its own, so it leaves lo alone and landlock
	// leaves TCP unrestricted.
	HostNetwork bool `json:"host_network,omitempty"`
	// SleepAfterMs is the quiet period, in milliseconds, after which an
	// idle init sleeps in its keeper (sandboxinit/sleep_linux.go): 0 is the default,
	// below 0 never.
	SleepAfterMs int `json:"sleep_after_ms,omitempty"`
	// LoopbackPorts are the TCP ports sandboxed code may bind and connect
	// on the sandbox's own loopback (landlock), and the only ports OpDial
	// reaches: the preview ports and the browser's. Ignored with
	// HostNetwork, where nothing is dialled.
	LoopbackPorts []uint16 `json:"loopback_ports,omitempty"`
	// Root, if set, makes the root an overlay of a template's layers
	// (rootfs.Overlay) instead of the host's /usr. Its descriptors come
	// with the setup request after the workspace: the writable layer, then
	// Root.Layers layer mounts, the lowest first.
	Root *RootSetup `json:"root,omitempty"`
	// MaxPTYs caps the terminals the sandbox's devpts instance hands out
	// (its max= option); 0 is DefaultMaxPTYs. Every instance draws on
	// the host's one pool, which the cap keeps one sandbox from emptying.
	MaxPTYs int `json:"max_ptys,omitempty"`
	// Kernel bounds what the kernel counts per user of the sandbox
	// (sandboxinit/kernellimits_linux.go); zero fields take the defaults.
	Kernel KernelLimits `json:"kernel,omitzero"`
}

// RootSetup describes a template sandbox's root.
type RootSetup struct {
	// Template names the template and its digest, for the layers report.
	Template string `json:"template"`
	// Layers is how many layer mounts the setup request carries.
	Layers int `json:"layers"`
}

// SetupFiles is how many descriptors a setup request carries: the
// workspace, and a template root's writable layer and layers.
func (s *Setup) SetupFiles() int {
	switch {
	case s.Root == nil:
		return 1
	case s.Root.Layers < 1 || s.Root.Layers > rootfs.MaxLayers:
		return -1 // no count of descriptors matches
	}
	return 2 + s.Root.Layers
}

// DefaultMaxPTYs is a sandbox's terminal cap when Setup names none: the
// 16 shell sessions a sandbox may hold, with room for terminals its own
// programs open (script, tmux, expect).
const DefaultMaxPTYs = 64

// PTYLimit is the sandbox's terminal cap (MaxPTYs, or DefaultMaxPTYs).
func (s Setup) PTYLimit() int {
	if s.MaxPTYs > 0 {
		return s.MaxPTYs
	}
	return DefaultMaxPTYs
}

// Layer is one isolation layer and whether it is in force.
type Layer struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
	Detail string `json:"detail,omitempty"`
}

// Ready is the reply to setup.
type Ready struct {
	Layers []Layer `json:"layers"`
}

// Limits are per-execution rlimits; zero means the init's default
// (inherited) value.
type Limits struct {
	CPUSeconds    uint64 `json:"cpu_seconds,omitempty"`
	FileSizeBytes uint64 `json:"file_size_bytes,omitempty"`
	OpenFiles     uint64 `json:"open_files,omitempty"`
}

// SpawnReq starts one process.
type SpawnReq struct {
	Argv []string `json:"argv"`
	// Env is the complete environment; nothing is inherited.
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
	Root bool     `json:"root,omitempty"`
	TTY  bool     `json:"tty,omitempty"`
	Rows uint16   `json:"rows,omitempty"`
	Cols uint16   `json:"cols,omitempty"`
	// Stdin asks for a pipe to the process's stdin (otherwise /dev/null).
	Stdin bool `json:"stdin,omitempty"`
	// DevToolsPipe gives the process two more pipes, as descriptors 3
	// (it reads) and 4 (it writes): Chromium's --remote-debugging-pipe.
	// The server's ends come back after the others: the writer to 3, the
	// reader of 4. Only the process and the server hold them, so nothing
	// else in the sandbox can stand in for the browser (as anything
	// binding its port could). Not with TTY.
	DevToolsPipe bool   `json:"devtools_pipe,omitempty"`
	Limits       Limits `json:"limits"`
	// CgroupFDs is how many attached descriptors are cgroup files of the
	// execution's group; HomeFDs how many after them are the sandbox's own
	// group's (v1: the forking thread returns there).
	CgroupFDs int `json:"cgroup_fds"`
	HomeFDs   int `json:"home_fds,omitempty"`
	// Held: the last attached descriptor is a Hold's reader. The init
	// prepares the command (checks, pipes, its path) and forks it only
	// once it has read the Hold's byte: the server writes it when the
	// call's audit record is durable. Read at its end without the byte
	// (the record failed, the call went away), the spawn is refused with
	// CodeNotReleased and nothing starts.
	Held bool `json:"held,omitempty"`
}

// SpawnResp is the reply to spawn; the descriptors come with it: stdin
// writer (when asked), stdout reader, stderr reader — or the PTY master —
// then, with DevToolsPipe, the writer to its descriptor 3 and the reader
// of its descriptor 4.
type SpawnResp struct {
	Pid int `json:"pid"`
}

// Exit reports how a spawned process ended.
type Exit struct {
	Pid int `json:"pid"`
	// Code is the exit status, or -1 when killed by Signal.
	Code   int   `json:"code"`
	Signal int   `json:"signal,omitempty"`
	CPUms  int64 `json:"cpu_ms"`
	MaxRSS int64 `json:"max_rss_kb"`
}

// FileReq is the argument of every file primitive.
type FileReq struct {
	Path string `json:"path"`
	// Path2 is the new name for rename and the link name for symlink
	// (Path is then the target).
	Path2 string `json:"path2,omitempty"`
	Flags int    `json:"flags,omitempty"`
	Mode  uint32 `json:"mode,omitempty"`
	// NoFollow refuses symlinks in any component (RESOLVE_NO_SYMLINKS).
	NoFollow  bool `json:"no_follow,omitempty"`
	Recursive bool `json:"recursive,omitempty"`
	// Offset and Limit page readdir.
	Offset int `json:"offset,omitempty"`
	Limit  int `json:"limit,omitempty"`
	// AsRoot runs the operation with the filesystem uid 0 of the
	// namespace instead of the sandbox user's.
	AsRoot bool `json:"as_root,omitempty"`
	// Walk and Grep are the arguments of OpWalk and OpGrep (Path is the
	// root of the walk).
	Walk *WalkReq `json:"walk,omitempty"`
	Grep *GrepReq `json:"grep,omitempty"`
}

// Stat describes one file.
type Stat struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"` // fs.FileMode bits
	ModTime int64  `json:"mtime_ns"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	Nlink   uint64 `json:"nlink"`
}

// FileResp is the reply to a file primitive.
type FileResp struct {
	Stat    *Stat  `json:"stat,omitempty"`
	Entries []Stat `json:"entries,omitempty"`
	More    bool   `json:"more,omitempty"`
	Target  string `json:"target,omitempty"`
	// Exists is OpResolve's answer: whether the resolved path exists
	// (Target is then the kernel's name for it, and Stat describes it).
	Exists bool      `json:"exists,omitempty"`
	Walk   *WalkResp `json:"walk,omitempty"`
	Grep   *GrepResp `json:"grep,omitempty"`
}

// Error is a failed request: Code is an errno name when the failure is a
// system call's, else one of the codes below.
type Error struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

// Codes that are not errno names.
const (
	CodeInvalid  = "EINVAL"
	CodeInternal = "internal"
	// CodeNotRegular is a read of a device, fifo or socket.
	CodeNotRegular = "ENOTREG"
	// CodePTYLimit: a spawn with a terminal found every terminal the
	// sandbox may hold (Setup.MaxPTYs, its devpts's max=) open.
	CodePTYLimit = "EPTYLIMIT"
	// CodePTYHost: a spawn with a terminal found the host's terminal pool
	// (kernel.pty.max less kernel.pty.reserve, shared by every devpts
	// instance) exhausted, with the sandbox below its own limit.
	CodePTYHost = "EPTYHOST"
	// CodeNotReleased: a held spawn's Hold ended unreleased; the command
	// never started.
	CodeNotReleased = "ENOTRELEASED"
)

func (e *Error) Error() string { return e.Msg }

// Errno returns the errno the error names, or 0.
func (e *Error) Errno() syscall.Errno {
	// Errno numbers on Linux stay below 134; the loop is bounded by that.
	for n := syscall.Errno(1); n < 134; n++ {
		if unix.ErrnoName(n) == e.Code {
			return n
		}
	}
	return 0
}

// Is lets errors.Is(err, fs.ErrNotExist) and friends work on replies.
func (e *Error) Is(target error) bool {
	n := e.Errno()
	return n != 0 && n.Is(target)
}

// ToError turns any error into a protocol error.
func ToError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var n syscall.Errno
	if errors.As(err, &n) {
		if name := unix.ErrnoName(n); name != "" {
			return &Error{Code: name, Msg: err.Error()}
		}
	}
	return &Error{Code: CodeInternal, Msg: err.Error()}
}

// Invalidf is a request the init refuses to act on.
func Invalidf(format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Msg: fmt.Sprintf(format, args...)}
}

// Conn is one end of the protocol socket. Send is safe for concurrent use;
// Recv must be called from one goroutine.
type Conn struct {
	c *net.UnixConn

	// mu serialises writers so a message and its descriptors stay whole.
	mu sync.Mutex

	rbuf []byte
	oob  []byte
}

// NewConn wraps a SOCK_SEQPACKET socket.
func NewConn(f *os.File) (*Conn, error) {
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("protocol socket: %w", err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		_ = nc.Close()
		return nil, errors.New("protocol socket: not a unix socket")
	}
	return &Conn{
		c:    uc,
		rbuf: make([]byte, MaxMessage),
		oob:  make([]byte, syscall.CmsgSpace(maxFDs*4)),
	}, nil
}

// Send writes one message with optional descriptors. The descriptors stay
// owned by the caller.
func (c *Conn) Send(v any, files ...*os.File) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	if len(b) > MaxMessage {
		return fmt.Errorf("message of %d bytes exceeds the protocol cap", len(b))
	}
	if len(files) > maxFDs {
		return fmt.Errorf("%d descriptors exceed the protocol cap", len(files))
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, err = c.c.WriteMsgUnix(b, oob, nil)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// Recv reads one message into v and returns the descriptors that came with
// it (close-on-exec; the caller owns them).
func (c *Conn) Recv(v any) ([]*os.File, error) {
	n, oobn, flags, _, err := c.c.ReadMsgUnix(c.rbuf, c.oob)
	if err != nil {
		return nil, err
	}
	files, ferr := parseRights(c.oob[:oobn])
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 {
		CloseAll(files)
		return nil, errors.New("protocol message truncated")
	}
	if ferr != nil {
		CloseAll(files)
		return nil, ferr
	}
	if n == 0 {
		CloseAll(files)
		return nil, errors.New("protocol peer closed")
	}
	if err := json.Unmarshal(c.rbuf[:n], v); err != nil {
		CloseAll(files)
		return nil, fmt.Errorf("decode message: %w", err)
	}
	return files, nil
}

// Unix is the socket itself: the init sets read deadlines on it and
// hands its descriptor on when it sleeps (sandboxinit/sleep_linux.go).
func (c *Conn) Unix() *net.UnixConn { return c.c }

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parse control message: %w", err)
	}
	var files []*os.File
	for i := range msgs {
		fds, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "passed"))
		}
	}
	return files, nil
}

// CloseAll closes every file of files that is set.
func CloseAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}
