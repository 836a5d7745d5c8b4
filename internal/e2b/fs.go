package e2b

import (
	"context"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandhold/sandhold/internal/agent"
	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/filesystempb"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/guard"
	"github.com/sandhold/sandhold/internal/ratelimit"
	"github.com/sandhold/sandhold/internal/workspace"
)

// The filesystem calls of envd that no file.* tool answers in envd's
// shape (stat with mode, owner and symlink target; a listing to a depth
// with every entry; mkdir -p; move; recursive remove). Each resolves its
// paths with workspace.Policy.Locate — inside the sandbox, the
// sensitive-path policy before existence, symlinks out of a writable tree
// refused — and acts on the resolved name without following symlinks, as
// the file.* tools do.

// home is where E2B's relative paths start: the sandbox user's home.
const home = "/workspace"

// maxListEntries caps one listing (the walk's own cap): envd has no
// truncated listing, so a larger one is refused rather than cut.
const maxListEntries = agent.MaxWalkResults

// absPath makes an E2B path absolute (relative paths start at the home).
func absPath(p string) string {
	if p == "" || !strings.HasPrefix(p, "/") {
		return path.Join(home, p)
	}
	return p
}

// FSPathArgs name one path of a sandbox.
type FSPathArgs struct {
	dispatch.On `required:"true" doc:"sandbox id"`
	Path        string `json:"path" required:"true"`
	Sudo        bool   `json:"sudo,omitempty" doc:"act as uid 0 inside the sandbox (E2B's user root; SANDBOX_ENABLE_SUDO)"`
}

// FSListArgs are e2b.fs_list's.
type FSListArgs struct {
	FSPathArgs
	Depth uint32 `json:"depth,omitempty" doc:"levels below the directory (default 1)"`
}

// FSMoveArgs are e2b.fs_move's.
type FSMoveArgs struct {
	dispatch.On `required:"true" doc:"sandbox id"`
	Source      string `json:"source" required:"true"`
	Destination string `json:"destination" required:"true"`
	Sudo        bool   `json:"sudo,omitempty"`
}

// FSMkdirResult is e2b.fs_mkdir's answer: Existed when the directory was
// already there (envd answers AlreadyExists, the SDK's false).
type FSMkdirResult struct {
	Entry   *filesystempb.EntryInfo `json:"entry"`
	Existed bool                    `json:"existed"`
}

// located resolves p in the caller's sandbox for op.
func (s *Service) located(ctx context.Context, c auth.Caller, sandboxID, op, p string, sudo bool) (workspace.FS, workspace.Located, error) {
	sb, err := s.sandboxOf(ctx, c, sandboxID)
	if err != nil {
		return nil, workspace.Located{}, err
	}
	l, err := s.d.Files.Locate(ctx, sb, op, absPath(p), sudo)
	return sb, l, err
}

// entry is envd's EntryInfo of st, a file at given (resolved: real).
func (s *Service) entry(ctx context.Context, f workspace.FS, given, real string, st agent.Stat, sudo bool) *filesystempb.EntryInfo {
	mode := fs.FileMode(st.Mode)
	e := &filesystempb.EntryInfo{Name: path.Base(given), Path: given, Size: st.Size, Mode: st.Mode,
		Permissions: mode.String(), Owner: userName(st.UID), Group: userName(st.GID),
		ModifiedTime: timestamppb.New(time.Unix(0, st.ModTime))}
	switch {
	case mode&fs.ModeSymlink != 0:
		e.Type = filesystempb.FileType_FILE_TYPE_SYMLINK
		if resp, _, err := f.File(ctx, agent.OpReadlink, agent.FileReq{Path: real, NoFollow: true, AsRoot: sudo}); err == nil {
			t := resp.Target
			e.SymlinkTarget = &t
		}
	case mode.IsDir():
		e.Type = filesystempb.FileType_FILE_TYPE_DIRECTORY
	default:
		e.Type = filesystempb.FileType_FILE_TYPE_FILE
	}
	return e
}

// userName names a uid inside a sandbox: root, the sandbox user, or the
// number.
func userName(id int) string {
	switch id {
	case 0:
		return "root"
	case 1000:
		return "sandbox"
	}
	return strconv.Itoa(id)
}

// stat is the entry at a located path (the file a symlink leads to).
func (s *Service) stat(ctx context.Context, f workspace.FS, op string, l workspace.Located, sudo bool) (*filesystempb.EntryInfo, error) {
	if !l.Exists {
		return nil, fault.Errorf(fault.NotFound, "%s %s: no such file or directory", op, l.Given)
	}
	return s.entry(ctx, f, l.Given, l.Resolved, l.Stat, sudo), nil
}

func (s *Service) fsTools() []dispatch.Tool {
	spec := func(desc string, risk guard.Risk) dispatch.Spec {
		return dispatch.Spec{Description: desc, Risk: risk, Category: ratelimit.File}
	}
	// Reads are Safe, changes Medium, and sudo raises a call to
	// Dangerous, as the file.* tools rate them; the paths go to the
	// policy's path rules.
	assess := func(risk guard.Risk, sudo bool, paths ...string) dispatch.Assessment {
		if sudo {
			risk = guard.Dangerous
		}
		abs := make([]string, len(paths))
		for i, p := range paths {
			abs[i] = absPath(p)
		}
		return dispatch.Assessment{Risk: risk, Paths: abs}
	}
	tgt := func(a FSPathArgs) dispatch.Target {
		return dispatch.Target{Target: absPath(a.Path), Sandbox: a.Sandbox}
	}
	return []dispatch.Tool{
		dispatch.Define(ToolFSStat, spec("E2B files.getInfo / files.exists: a file's or directory's entry", guard.Safe),
			func(ctx context.Context, c auth.Caller, a FSPathArgs) (*filesystempb.EntryInfo, error) {
				f, l, err := s.located(ctx, c, a.Sandbox, "stat", a.Path, a.Sudo)
				if err != nil {
					return nil, err
				}
				return s.stat(ctx, f, "stat", l, a.Sudo)
			}, dispatch.Hooks[FSPathArgs, *filesystempb.EntryInfo]{
				Assess: func(a FSPathArgs) dispatch.Assessment { return assess(guard.Safe, a.Sudo, a.Path) }, Describe: tgt}),
		dispatch.Define(ToolFSList, spec("E2B files.list: a directory's entries, to a depth", guard.Safe),
			func(ctx context.Context, c auth.Caller, a FSListArgs) ([]*filesystempb.EntryInfo, error) {
				return s.listDir(ctx, c, a)
			}, dispatch.Hooks[FSListArgs, []*filesystempb.EntryInfo]{
				Assess: func(a FSListArgs) dispatch.Assessment {
					as := assess(guard.Safe, a.Sudo, a.Path)
					if a.Depth > 1 {
						as.Trees = as.Paths // walks the subtree
					}
					return as
				},
				Describe: func(a FSListArgs) dispatch.Target { return tgt(a.FSPathArgs) }}),
		dispatch.Define(ToolFSMkdir, spec("E2B files.makeDir: make a directory and its parents", guard.Medium),
			func(ctx context.Context, c auth.Caller, a FSPathArgs) (FSMkdirResult, error) {
				f, l, err := s.located(ctx, c, a.Sandbox, "mkdir", a.Path, a.Sudo)
				if err != nil {
					return FSMkdirResult{}, err
				}
				if l.Exists {
					e, err := s.stat(ctx, f, "mkdir", l, a.Sudo)
					return FSMkdirResult{Entry: e, Existed: true}, err
				}
				if _, _, err := f.File(ctx, agent.OpMkdir, agent.FileReq{Path: l.Resolved, Recursive: true, NoFollow: true, Mode: 0o755, AsRoot: a.Sudo}); err != nil {
					return FSMkdirResult{}, workspace.FileErr("mkdir", l.Given, err)
				}
				l, err = s.d.Files.Locate(ctx, f, "mkdir", l.Given, a.Sudo)
				if err != nil {
					return FSMkdirResult{}, err
				}
				e, err := s.stat(ctx, f, "mkdir", l, a.Sudo)
				return FSMkdirResult{Entry: e}, err
			}, dispatch.Hooks[FSPathArgs, FSMkdirResult]{
				Assess: func(a FSPathArgs) dispatch.Assessment { return assess(guard.Medium, a.Sudo, a.Path) }, Describe: tgt}),
		dispatch.Define(ToolFSMove, spec("E2B files.rename: move a file or directory", guard.Medium),
			func(ctx context.Context, c auth.Caller, a FSMoveArgs) (*filesystempb.EntryInfo, error) {
				f, from, err := s.located(ctx, c, a.Sandbox, "move", a.Source, a.Sudo)
				if err != nil {
					return nil, err
				}
				if !from.Exists {
					return nil, fault.Errorf(fault.NotFound, "move %s: no such file or directory", from.Given)
				}
				to, err := s.d.Files.Locate(ctx, f, "move", absPath(a.Destination), a.Sudo)
				if err != nil {
					return nil, err
				}
				if _, _, err := f.File(ctx, agent.OpRename, agent.FileReq{Path: from.Resolved, Path2: to.Resolved, NoFollow: true, AsRoot: a.Sudo}); err != nil {
					return nil, workspace.FileErr("move", from.Given, err)
				}
				if to, err = s.d.Files.Locate(ctx, f, "move", to.Given, a.Sudo); err != nil {
					return nil, err
				}
				return s.stat(ctx, f, "move", to, a.Sudo)
			}, dispatch.Hooks[FSMoveArgs, *filesystempb.EntryInfo]{
				Assess: func(a FSMoveArgs) dispatch.Assessment {
					return assess(guard.Medium, a.Sudo, a.Source, a.Destination)
				},
				Describe: func(a FSMoveArgs) dispatch.Target {
					return dispatch.Target{Target: absPath(a.Source), Sandbox: a.Sandbox, Detail: map[string]any{"destination": absPath(a.Destination)}}
				}}),
		dispatch.Define(ToolFSRemove, spec("E2B files.remove: remove a file, or a directory with everything in it", guard.Medium),
			func(ctx context.Context, c auth.Caller, a FSPathArgs) (bool, error) {
				f, l, err := s.located(ctx, c, a.Sandbox, "remove", a.Path, a.Sudo)
				if err != nil {
					return false, err
				}
				if !l.Exists {
					return false, fault.Errorf(fault.NotFound, "remove %s: no such file or directory", l.Given)
				}
				if _, _, err := f.File(ctx, agent.OpRemove, agent.FileReq{Path: l.Resolved, Recursive: true, NoFollow: true, AsRoot: a.Sudo}); err != nil {
					return false, workspace.FileErr("remove", l.Given, err)
				}
				return true, nil
			}, dispatch.Hooks[FSPathArgs, bool]{
				Assess: func(a FSPathArgs) dispatch.Assessment {
					as := assess(guard.Medium, a.Sudo, a.Path)
					as.Trees = as.Paths // removes the subtree
					return as
				}, Describe: tgt}),
	}
}

// listDir walks a directory to a depth; entries are named by their path
// under the directory as the caller named it.
func (s *Service) listDir(ctx context.Context, c auth.Caller, a FSListArgs) ([]*filesystempb.EntryInfo, error) {
	f, l, err := s.located(ctx, c, a.Sandbox, "list", a.Path, a.Sudo)
	if err != nil {
		return nil, err
	}
	if !l.Exists {
		return nil, fault.Errorf(fault.NotFound, "list %s: no such directory", l.Given)
	}
	if !fs.FileMode(l.Stat.Mode).IsDir() {
		return nil, fault.Errorf(fault.Invalid, "list %s: not a directory", l.Given)
	}
	depth := max(int(a.Depth), 1)
	if depth > agent.MaxWalkDepth {
		return nil, fault.InvalidField("depth", "depth is at most 64")
	}
	resp, _, err := f.File(ctx, agent.OpWalk, agent.FileReq{Path: l.Resolved, NoFollow: true, AsRoot: a.Sudo,
		Walk: &agent.WalkReq{MaxDepth: depth, Hidden: true, Limit: maxListEntries, Deny: s.d.Files.Deny()}})
	if err != nil {
		return nil, workspace.FileErr("list", l.Given, err)
	}
	if resp.Walk == nil {
		return nil, fault.New(fault.Internal, "list: the sandbox answered no walk")
	}
	if resp.Walk.Truncated {
		return nil, fault.Errorf(fault.TooLarge, "list %s: more entries than one listing holds (%d); list with a smaller depth", l.Given, maxListEntries)
	}
	out := make([]*filesystempb.EntryInfo, 0, len(resp.Walk.Entries))
	for _, e := range resp.Walk.Entries {
		rel := e.Name
		out = append(out, s.entry(ctx, f, path.Join(l.Given, rel), path.Join(resp.Walk.Root, rel), e, a.Sudo))
	}
	return out, nil
}
