// Package transfer moves bulk data in and out of sandboxes: streamed
// uploads and downloads (with HTTP Range and change detection), archive
// extraction and packing, and resumable artifact uploads.
//
// What it stops: an upload or archive that escapes the sandbox's view or its
// quota, and partial results. Every byte goes through a descriptor the
// sandbox's init opened inside the sandbox (the server never resolves a
// sandbox path on the host); archives are unpacked and packed by the init
// itself (internal/agent, internal/archive), so a hostile archive meets an
// *os.Root inside the sandbox, never the host. Uploads stream into a temp
// file next to the target and are renamed into place only when complete, so
// a failed, cancelled or over-quota upload leaves nothing; the quota itself
// is the kernel's (each workspace is its own file system, see
// internal/sandbox), so no accounting here can be raced.
//
// Every operation is a dispatch.Tool (file.upload, file.download,
// file.extract, file.archive, artifact.*): the HTTP handlers in
// internal/api decode the request, Dispatch, and stream what Run returns.
package transfer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/archive"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/workspace"
)

// Caps with their reasons.
const (
	// copyBuf is the size of one copy between the network and a sandbox
	// descriptor: large enough that a 1 GiB stream costs few syscalls.
	copyBuf = 1 << 20
	// maxPackEntries caps the objects one directory download visits; a
	// directory tree is not an archive bomb, but walking it is work the
	// server does on the sandbox's behalf.
	maxPackEntries = 100_000
	// maxMetaBytes caps an artifact upload's metadata file, which the
	// sandbox's own code could have rewritten.
	maxMetaBytes = 4096
)

// Config are the service's settings.
type Config struct {
	// MaxUploadBytes caps one upload (and one artifact); 0 means the
	// sandbox's quota is the only cap.
	MaxUploadBytes int64
	// Extract are the caps of one extraction; MaxTotalBytes is further
	// lowered to the sandbox's quota and, by the init, to its free space.
	// Zero value: archive.DefaultLimits().
	Extract archive.Limits
	// Deny is the sensitive-path policy (the workspace package's table):
	// checked on every path as given and as resolved inside the sandbox,
	// before the call looks at whether the file exists.
	Deny agent.Deny
	Log  *slog.Logger
}

// Service implements the transfer tools over the sandbox manager.
type Service struct {
	m   *sandbox.Manager
	cfg Config
	pol workspace.Policy // cfg.Deny as the resolver's policy
	log *slog.Logger

	// mu guards busy: artifact uploads a call works on (closed when it
	// is done), so two writers never race on one offset.
	mu   sync.Mutex
	busy map[string]chan struct{}
}

// New returns the service.
func New(m *sandbox.Manager, cfg Config) *Service {
	if cfg.Extract == (archive.Limits{}) {
		cfg.Extract = archive.DefaultLimits()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	pol := workspace.Policy{Names: cfg.Deny.Names, Dirs: cfg.Deny.Dirs, Paths: cfg.Deny.Paths}
	if pol.Names == nil && pol.Dirs == nil && pol.Paths == nil {
		pol = workspace.DefaultPolicy() // no policy given: the default, never none
	}
	cfg.Deny = pol.Deny() // with Procs, and hard-linked files refused
	return &Service{m: m, cfg: cfg, pol: pol, log: cfg.Log, busy: make(map[string]chan struct{})}
}

func (s *Service) sandbox(ctx context.Context, c auth.Caller, id string) (*sandbox.Sandbox, error) {
	return s.m.Resolve(ctx, c, id)
}

// uploadCap is the most one upload into sb may write.
func (s *Service) uploadCap(sb *sandbox.Sandbox) int64 {
	lim := sb.DiskLimit()
	if s.cfg.MaxUploadBytes > 0 && (lim <= 0 || s.cfg.MaxUploadBytes < lim) {
		lim = s.cfg.MaxUploadBytes
	}
	if lim <= 0 {
		lim = 1 << 62
	}
	return lim
}

// checkPath validates a client path before any round trip.
func checkPath(field, p string) error {
	if p == "" {
		return fault.InvalidField(field, field+" is required")
	}
	if err := agent.CheckPath(p); err != nil {
		return fault.InvalidField(field, field+": "+err.Error())
	}
	return nil
}

// safeName validates one file name component chosen by a client.
func safeName(field, n string) error {
	switch {
	case n == "" || n == "." || n == "..":
		return fault.InvalidField(field, field+" must be a file name")
	case len(n) > 255:
		return fault.InvalidField(field, field+" is longer than 255 bytes")
	case strings.ContainsAny(n, "/\x00"):
		return fault.InvalidField(field, field+" must not contain '/' or NUL")
	}
	return nil
}

// errQuota is what an upload beyond the workspace quota (or the upload cap)
// says; its kind is TooLarge (413).
const errQuota = "the workspace quota (or the upload size cap) would be exceeded; nothing was written"

// fileError maps an error from the init or from a write to a descriptor to
// a client-safe fault naming the sandbox path.
func fileError(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	var ae *archive.Error
	if errors.As(err, &ae) {
		return ae.Fault("")
	}
	if errors.Is(err, agent.ErrGone) {
		return fault.Wrap(fault.Unavailable, err, "the sandbox stopped during the operation")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fault.Wrap(fault.Timeout, err, op+" was cancelled")
	}
	var n syscall.Errno
	if !errors.As(err, &n) {
		var pe *agent.Error
		if errors.As(err, &pe) {
			n = pe.Errno()
			if n == 0 && pe.Code == agent.CodeInvalid {
				return fault.Wrap(fault.Invalid, err, fmt.Sprintf("%s %s: %s", op, p, pe.Msg))
			}
		}
	}
	msg := func(what string) string { return fmt.Sprintf("%s %s: %s", op, p, what) }
	switch n {
	case syscall.ENOENT:
		return fault.Wrap(fault.NotFound, err, msg("no such file or directory"))
	case syscall.EACCES, syscall.EPERM:
		return fault.Wrap(fault.Forbidden, err, msg("permission denied"))
	case syscall.EROFS:
		return fault.Wrap(fault.Forbidden, err, msg("read-only file system"))
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return fault.Wrap(fault.TooLarge, err, msg(errQuota))
	case syscall.EEXIST, syscall.ENOTEMPTY:
		return fault.Wrap(fault.Conflict, err, msg("already exists"))
	case syscall.EISDIR:
		return fault.Wrap(fault.Invalid, err, msg("is a directory"))
	case syscall.ENOTDIR:
		return fault.Wrap(fault.Invalid, err, msg("a path component is not a directory"))
	case syscall.ELOOP:
		return fault.Wrap(fault.Invalid, err, msg("symbolic link refused"))
	case syscall.ENAMETOOLONG:
		return fault.Wrap(fault.Invalid, err, msg("name too long"))
	case syscall.EINVAL:
		return fault.Wrap(fault.Invalid, err, msg("invalid argument"))
	case syscall.EXDEV:
		return fault.Wrap(fault.Invalid, err, msg("crosses file systems"))
	}
	return fault.Wrap(fault.Internal, err, msg("i/o error"))
}

// parentOf is the directory of a clean absolute path.
func parentOf(p string) string { return path.Dir(p) }

// randHex returns n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// closeQuiet closes f, ignoring the error (read-only or already failed).
func closeQuiet(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}

func requireStreaming(ctx context.Context, tool string) error {
	if !dispatch.Streaming(ctx) {
		return fault.New(fault.Invalid, tool+" streams its data and is only available over its HTTP route")
	}
	return nil
}

// resolve is the one path resolver of every file route
// (workspace.Policy.Locate): the policy on p as given and as the
// sandbox's kernel resolves it, the writable-tree check and the hard-link
// check, each before the call looks at whether the file exists. Callers
// act on Located.Resolved with NoFollow, so a symlink swapped in
// afterwards makes the call fail instead of redirecting it, and judge
// what they open with workspace.CheckOpened.
func (s *Service) resolve(ctx context.Context, sb *sandbox.Sandbox, op, p string) (workspace.Located, error) {
	return s.pol.Locate(ctx, sb, op, p, false)
}

// denied checks the policy on a name as text (one the service composes,
// before any round trip).
func (s *Service) denied(op, p string) error {
	if s.cfg.Deny.Denied(p) {
		return fault.New(fault.Forbidden, op+" "+p+": access to this path is refused by the sensitive-path policy")
	}
	return nil
}
