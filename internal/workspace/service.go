package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
)

// FS is one sandbox's file primitives, executed by its init
// (*sandbox.Sandbox implements it).
type FS interface {
	ID() string
	File(ctx context.Context, op agent.Op, r agent.FileReq) (*agent.FileResp, *os.File, error)
}

// Resolver finds the sandbox a call names: id, or the caller's default
// sandbox when id is empty. It enforces ownership.
type Resolver func(ctx context.Context, c auth.Caller, id string) (FS, error)

// Config configures the service.
type Config struct {
	// MaxFileSize caps the file one JSON call reads or writes
	// (SANDBOX_MAX_FILE_SIZE).
	MaxFileSize int64
	// MaxFilesPerRequest caps the entries of one multi-file result
	// (SANDBOX_MAX_FILES_PER_REQUEST); more sets truncated.
	MaxFilesPerRequest int
	// AllowSudo lets sudo: true act as uid 0 inside the sandbox
	// (SANDBOX_ENABLE_SUDO); the init refuses it otherwise anyway.
	AllowSudo bool
	Policy    Policy
	Resolve   Resolver
}

// Caps of the service with their reasons.
const (
	// maxUndoPerSandbox and maxUndoBytesPerSandbox bound the
	// str_replace_editor history kept in memory for one sandbox; the
	// oldest entries go first.
	maxUndoPerSandbox      = 32
	maxUndoBytesPerSandbox = 32 << 20
	// maxUndoSandboxes bounds how many sandboxes keep a history at all.
	maxUndoSandboxes = 1024
)

// Service runs file calls.
type Service struct {
	cfg Config

	// mu guards undo.
	mu   sync.Mutex
	undo map[string]*history // sandbox id → its edit history

	watches *watchTable
}

// New returns a service. Zero caps take the documented defaults.
func New(cfg Config) *Service {
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = 10 << 20
	}
	if cfg.MaxFilesPerRequest <= 0 {
		cfg.MaxFilesPerRequest = 100
	}
	if cfg.Policy.Names == nil && cfg.Policy.Dirs == nil && cfg.Policy.Paths == nil {
		cfg.Policy = DefaultPolicy()
	}
	s := &Service{cfg: cfg, undo: make(map[string]*history)}
	s.watches = newWatchTable()
	return s
}

// Close stops every watch.
func (s *Service) Close() { s.watches.closeAll() }

// target is a path after steps 1–3 of the package doc.
type target struct {
	given    string // as the client wrote it (cleaned)
	resolved string // the kernel's name inside the sandbox
	exists   bool
	stat     agent.Stat
	root     bool // act with the namespace's uid 0 (sudo)
}

func (t target) isDir() bool { return t.exists && fs.FileMode(t.stat.Mode).IsDir() }

// locate validates, resolves and checks a path (Policy.Locate). The
// sensitive-path check comes before anything looks at t.exists.
func (s *Service) locate(ctx context.Context, f FS, op, p string, sudo bool) (target, error) {
	l, err := s.cfg.Policy.Locate(ctx, f, op, p, sudo)
	if err != nil {
		return target{}, err
	}
	return target{given: l.Given, resolved: l.Resolved, exists: l.Exists, stat: l.Stat, root: sudo}, nil
}

// readFile reads a located regular file whole, at most MaxFileSize bytes.
func (s *Service) readFile(ctx context.Context, f FS, op string, t target) ([]byte, agent.Stat, error) {
	if !t.exists {
		return nil, agent.Stat{}, newErr(fault.NotFound, op, t.given, TypeNotFound, "no such file or directory", false, "", nil)
	}
	if t.isDir() {
		return nil, agent.Stat{}, newErr(fault.Invalid, op, t.given, TypeInvalidTarget, "is a directory", false, "", nil)
	}
	resp, file, err := f.File(ctx, agent.OpOpenRead, agent.FileReq{Path: t.resolved, NoFollow: true, AsRoot: t.root})
	if err != nil {
		return nil, agent.Stat{}, fileErr(op, t.given, err)
	}
	defer func() { _ = file.Close() }() // read-only: nothing to lose on close
	st := *resp.Stat
	// The descriptor is what counts: a file swapped in after resolve is
	// judged by what was opened.
	fst, err := CheckOpened(op, Located{Given: t.given, Resolved: t.resolved}, file)
	if err != nil {
		return nil, st, err
	}
	if fst.Size > s.cfg.MaxFileSize {
		return nil, st, s.tooLarge(op, t.given)
	}
	// /proc files report size 0: read until EOF, one byte past the cap.
	data, err := io.ReadAll(io.LimitReader(file, s.cfg.MaxFileSize+1))
	if err != nil {
		return nil, st, fileErr(op, t.given, err)
	}
	if int64(len(data)) > s.cfg.MaxFileSize {
		return nil, st, s.tooLarge(op, t.given)
	}
	return data, st, nil
}

func (s *Service) tooLarge(op, p string) error {
	return newErr(fault.TooLarge, op, p, TypeInvalidTarget,
		"the file exceeds SANDBOX_MAX_FILE_SIZE for JSON file calls; use the download route", false, "size", nil)
}

// writeFile replaces a located file's content atomically: a temporary
// file beside it (O_CREAT|O_EXCL, never following symlinks), write, fsync,
// rename over the target, fsync the directory. mkParents creates missing
// parent directories first.
func (s *Service) writeFile(ctx context.Context, f FS, op string, t target, data []byte, mkParents bool) error {
	if int64(len(data)) > s.cfg.MaxFileSize {
		return s.tooLarge(op, t.given)
	}
	if t.isDir() {
		return newErr(fault.Invalid, op, t.given, TypeInvalidTarget, "is a directory", false, "", nil)
	}
	if t.exists && !fs.FileMode(t.stat.Mode).IsRegular() {
		return newErr(fault.Invalid, op, t.given, TypeInvalidTarget, "not a regular file", false, "", nil)
	}
	dir, base := path.Split(t.resolved)
	dir = path.Clean(dir)
	if base == "" {
		return newErr(fault.Invalid, op, t.given, TypeInvalidTarget, "path names the root", false, "", nil)
	}
	if mkParents && !t.exists {
		if _, _, err := f.File(ctx, agent.OpMkdir, agent.FileReq{Path: dir, Recursive: true, NoFollow: true, Mode: 0o755, AsRoot: t.root}); err != nil {
			return fileErr(op, t.given, err)
		}
	}
	mode := uint32(0o644)
	if t.exists {
		mode = t.stat.Mode & 0o777
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmpName := "." + base
	if len(tmpName) > 200 {
		tmpName = tmpName[:200]
	}
	tmp := path.Join(dir, tmpName+".sandhold-"+hex.EncodeToString(rnd[:])+".tmp")
	_, file, err := f.File(ctx, agent.OpOpen, agent.FileReq{Path: tmp, Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW,
		Mode: mode, NoFollow: true, AsRoot: t.root})
	if err != nil {
		return fileErr(op, t.given, err)
	}
	cleanup := func() {
		_, _, _ = f.File(context.WithoutCancel(ctx), agent.OpRemove, agent.FileReq{Path: tmp, NoFollow: true, AsRoot: t.root})
	}
	_, werr := file.Write(data)
	if werr == nil {
		werr = file.Sync()
	}
	if cerr := file.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		cleanup()
		return fileErr(op, t.given, werr)
	}
	if _, _, err := f.File(ctx, agent.OpRename, agent.FileReq{Path: tmp, Path2: t.resolved, NoFollow: true, AsRoot: t.root}); err != nil {
		cleanup()
		return fileErr(op, t.given, err)
	}
	// The rename is durable once the directory is on disk.
	if _, d, err := f.File(ctx, agent.OpOpen, agent.FileReq{Path: dir, Flags: unix.O_RDONLY | unix.O_DIRECTORY, NoFollow: true, AsRoot: t.root}); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// sandboxOf resolves the sandbox of a call.
func (s *Service) sandboxOf(ctx context.Context, c auth.Caller, id string) (FS, error) {
	if s.cfg.Resolve == nil {
		return nil, errors.New("workspace: no sandbox resolver")
	}
	return s.cfg.Resolve(ctx, c, id)
}
